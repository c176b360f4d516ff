"""`stitchsweep report`: an HTML page that works offline (Vega JavaScript inlined) plus PNG charts and CSVs."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pandas as pd

from .charts import stitching_grid
from .load import load

TRIAL_COLUMNS = ["front", "end", "front_point", "objective", "alpha", "seed", "clean_acc", "relative_acc",
                 "robust_acc", "most_frequent_class_ratio", "time_fit_s", "time_total_s"]
DONOR_COLUMNS = ["donor", "arch", "training", "epochs", "clean_acc", "robust_acc", "n_eval_robust", "eps",
                 "trained_now"]


def _table(df: pd.DataFrame, columns: list[str]) -> str:
    cols = [c for c in columns if c in df.columns]
    return df[cols].to_html(index=False, float_format=lambda v: f"{v:.3f}", na_rep="", border=0)


def write_report(results: str | Path, out: str | Path) -> Path:
    """Write `index.html`, `stitching.png` (all plots), one `stitching_<front>__<end>.png` per donor pair,
    `trials.csv` and `donors.csv` into `out`; return the HTML path."""
    import vl_convert

    results, out = Path(results), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tables = load(results)
    trials, donors = tables["trials"], tables["donors"]
    trials.to_csv(out / "trials.csv", index=False)
    donors.to_csv(out / "donors.csv", index=False)

    n_done = int((trials["status"] == "done").sum())
    failed = trials[trials["status"] == "failed"]
    parts = [
        f"<h1>stitchsweep report: {html.escape(results.name)}</h1>",
        f"<p>{len(trials)} trials recorded: {n_done} done, {len(failed)} failed."
        " Stitching plots: clean (blue) and robust (yellow) accuracy of the stitched network at each stitch"
        " point; bands span the two donors' accuracies.</p>",
    ]
    chart_html = "<p>No finished trials to plot yet.</p>"
    if n_done:
        chart = stitching_grid(trials)
        (out / "stitching.png").write_bytes(vl_convert.vegalite_to_png(chart.to_dict(), scale=1.5))
        chart_html = chart.to_html(inline=True)
        done = trials[trials["status"] == "done"]
        for pair in done[["front", "end"]].drop_duplicates().itertuples(index=False):
            one = stitching_grid(done[(done["front"] == pair.front) & (done["end"] == pair.end)])
            name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"stitching_{pair.front}__{pair.end}")
            (out / f"{name}.png").write_bytes(vl_convert.vegalite_to_png(one.to_dict(), scale=1.5))
    parts.append("<h2>Donors</h2>" + _table(donors, DONOR_COLUMNS))
    if len(failed):
        parts.append("<h2>Failed trials</h2>" + _table(failed, ["trial_id", "front", "end", "front_point",
                                                                 "objective", "error"]))
    parts.append("<h2>Trials</h2>" + _table(trials[trials["status"] == "done"].sort_values(
        ["front", "end", "objective", "point_index"]), TRIAL_COLUMNS))
    body = "\n".join(parts)
    marker = '<div class="vega-visualization" id="vis"></div>'
    if marker in chart_html:
        page = chart_html.replace(marker, f"{parts[0]}{parts[1]}<h2>Stitching plots</h2>{marker}"
                                  + "\n".join(parts[2:]), 1)
    else:
        page = f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{body}{chart_html}</body></html>"
    index = out / "index.html"
    index.write_text(page)
    return index
