"""The report's HTML: its tables, its header (how much of the sweep is recorded) and the page around the
inlined Vega-Lite charts. Offline: Vega's scripts are inlined by Altair, nothing is fetched."""

from __future__ import annotations

import html
import json
from datetime import datetime, timezone
from pathlib import Path

import altair as alt
import pandas as pd

from analysis.charts.per_point import same_layer
from analysis.charts.stitching import collapse_trials

MANIFEST = "manifest.json"  # what a report wrote: the next report of the same sweep replaces exactly that


class ReportFolderError(ValueError):
    """The output folder holds files this sweep's previous report did not write."""


def claim_folder(out: Path, sweep: str) -> None:
    """Make `out` ready for `sweep`'s report: create it, or, when it holds this sweep's previous report (its
    manifest), delete the files that report listed. Refuse a non-empty folder without a manifest (a person's
    files) or with another sweep's."""
    out.mkdir(parents=True, exist_ok=True)
    entries = [p for p in out.iterdir()]
    if not entries:
        return
    manifest = out / MANIFEST
    if not manifest.is_file():
        raise ReportFolderError(f"{out} is not empty and holds no report of {sweep} ({len(entries)} entries)")
    previous = json.loads(manifest.read_text())
    if previous.get("sweep") != sweep:
        raise ReportFolderError(f"{out} holds the report of another sweep ({previous.get('sweep')!r})")
    for name in previous.get("files", []):
        (out / name).unlink(missing_ok=True)
    manifest.unlink()


def write_manifest(out: Path, sweep: str, files: list[str]) -> None:
    """Record whose report `out` holds and what it wrote (first with no files, when the report starts; then
    with every file it wrote)."""
    doc = {"sweep": sweep, "written_at": datetime.now(timezone.utc).isoformat(), "files": sorted(set(files))}
    (out / MANIFEST).write_text(json.dumps(doc, indent=2))


def table(df: pd.DataFrame, columns: list[str]) -> str:
    cols = [c for c in columns if c in df.columns]
    return df[cols].to_html(index=False, float_format=lambda v: f"{v:.3f}", na_rep="", border=0)


def markdown_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (floats to 3 decimals)."""
    cells = [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row] for row in df.itertuples(index=False)]
    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in cells]) + "\n"


def counts(expected: dict | None) -> str:
    """'48 of 48 trials recorded (47 done, 1 failed), 0 pending; ...' for the header, per kind of work."""
    if not expected:
        return ""
    parts = []
    for k in expected["kinds"].values():
        recorded = k["done"] + k["failed"]
        text = f"{recorded} of {k['total']} {k['noun']} recorded ({k['done']} done, {k['failed']} failed)"
        text += f", {k['pending']} pending"
        parts.append(text + (f", {k['blocked']} blocked by failed donors" if k.get("blocked") else ""))
    return "<p><b>Sweep:</b> " + "; ".join(parts) + ".</p>"


def page(data, charts: list, html_tables: list[str], expected: dict | None = None) -> str:
    intro = (
        f"<h1>stitchsweep report: {html.escape(data.name)}</h1>"
        + counts(expected)
        + f"<p>{len(data.trials)} trials recorded: {len(data.done)} done, {len(data.failed)} failed."
        + chart_notes(data)
        + "</p>"
    )
    rest = "\n".join(html_tables) + TABLE_SCRIPT
    head = f"<head><meta charset='utf-8'><title>stitchsweep: {html.escape(data.name)}</title>{STYLE}"
    marker = '<div class="vega-visualization" id="vis"></div>'
    if charts:
        chart = alt.vconcat(*charts, spacing=40).resolve_scale(color="independent")
        chart_html = chart.to_html(inline=True, embed_options={"renderer": "svg"})  # marks a test can count
        chart_html = chart_html.replace("<head>", head, 1)
        return chart_html.replace(marker, intro + "<h2>Charts</h2>" + marker + rest, 1)
    return f"<!DOCTYPE html><html>{head}</head><body>{intro}<p>No finished trials to plot yet.</p>{rest}</body></html>"


def _robust(trials: pd.DataFrame) -> bool:
    return "robust_acc" in trials and trials["robust_acc"].notna().any()


def chart_notes(data) -> str:
    """How to read the stitching, class-collapse and cross-task charts, for those the report draws (trials
    stitched at the same points), robust accuracy named only where some trial measured one."""
    notes = ""
    stitched, crossed = same_layer(data.same_task), same_layer(data.cross_task)
    if len(stitched):
        notes += (
            " Stitching plots: the stitched network's accuracy at each stitch point (mean over seeds; whiskers:"
            " min-max), one line per setting (objective, alpha, beta, init, stitcher), one row per donor pair"
            + ("; robust accuracy dashed." if _robust(stitched) else ".")
        )
    if len(collapse_trials(data.done)):
        notes += " Class collapse: the share of the most often predicted class (black line: 1/number of classes)."
    if len(crossed):
        notes += (
            " Cross-task: donors trained on different datasets, one column per setting; 'on D' names the data the"
            " stitcher was trained and tested on; "
            + ("clean (blue) and robust (yellow) accuracy" if _robust(crossed) else "accuracy")
            + " of the stitched network; each band spans the donors' accuracies on their own tasks."
        )
    return notes


# Inline, so the report stays one offline file: a readable page, and tables that sort (click a header) and
# filter (type in the box above them).
STYLE = """<style>
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 110em; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table.dataframe { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
table.dataframe th, table.dataframe td { padding: 0.2em 0.6em; border-bottom: 1px solid #eee; text-align: right; }
table.dataframe th { background: #f4f4f4; cursor: pointer; position: sticky; top: 0; }
table.dataframe tr:hover td { background: #f8f8ff; }
input.filter { margin: 0.5em 0 0; padding: 0.2em 0.4em; width: 20em; }
</style>"""
TABLE_SCRIPT = """<script>
document.querySelectorAll("table.dataframe").forEach(function (table) {
  var body = table.tBodies[0];
  if (!body) { return; }
  var box = document.createElement("input");
  box.className = "filter"; box.placeholder = "filter rows";
  box.addEventListener("input", function () {
    var q = box.value.toLowerCase();
    Array.from(body.rows).forEach(function (r) {
      r.style.display = r.textContent.toLowerCase().includes(q) ? "" : "none";
    });
  });
  table.parentNode.insertBefore(box, table);
  Array.from(table.tHead.rows[0].cells).forEach(function (th, col) {
    th.title = "sort"; var up = true;
    th.addEventListener("click", function () {
      var rows = Array.from(body.rows), key = function (r) { return r.cells[col].textContent.trim(); };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b), nx = parseFloat(x), ny = parseFloat(y);
        var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
        return up ? c : -c;
      });
      up = !up; rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
</script>"""
