"""`stitchsweep report`: an HTML page that works offline (Vega JavaScript inlined) plus PNG charts and CSVs."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import pandas as pd

from analysis.charts.titles import wrap_title
from analysis.report.data import report_data
from analysis.report.page import MANIFEST, claim_folder, markdown_table, page, table, write_manifest
from analysis.report.sections import chart_sections
from analysis.report.table_sections import table_sections
from sweep.store.storage import Loc, open_root


def _png(chart, path: Path) -> None:
    import vl_convert

    path.write_bytes(vl_convert.vegalite_to_png(chart.to_dict(), scale=1.5))


def write_report(results: str | Path | Loc, out: str | Path, expected: dict | None = None) -> Path:
    """Write into `out`: `index.html` and the files of every chart and table section that has data
    (`chart_sections()` and `table_sections()`: those of each kind of work, in report order; e.g.
    `stitching.png` with one `stitching_<front>__<end>.png` per pair, `layer_identification.csv`/`.md`,
    `problems.csv`, `donors.csv`), plus `trials.csv`. Returns the HTML path.

    `expected` (what `stitchsweep report` passes: the sweep's `space.yaml` read by the engine) holds per kind
    of work its counts (`kinds`: name -> {noun, total, done, failed, pending, blocked}) and the trial ids of
    the space (`trial_ids`): the page's header then says how much of the sweep is recorded, and trials no
    longer in the space are listed apart (`stale_trials.csv`) instead of being drawn."""
    with alt.data_transformers.disable_max_rows():  # t-SNE maps and every-module matrices hold many points
        return _write_report(results, out, expected)


def _write_report(results: str | Path | Loc, out: str | Path, expected: dict | None) -> Path:
    results, out = open_root(results), Path(out)  # results: a local folder or a pyarrow.fs URI
    claim_folder(out, results.name)
    write_manifest(out, results.name, [])  # the folder is this sweep's from now on, even if this report stops
    data, stale = report_data(results, expected)
    data.trials.to_csv(out / "trials.csv", index=False)
    charts = write_charts(data, out)
    html_tables = write_tables(data, out)
    if len(stale):
        stale.to_csv(out / "stale_trials.csv", index=False)
        html_tables.append(
            "<h2>Trials no longer in the space</h2><p>Recorded by an earlier version of the search space; not"
            " drawn above (<code>stale_trials.csv</code>).</p>" + table(stale, STALE_COLUMNS)
        )
    index = out / "index.html"
    index.write_text(page(data, charts, html_tables, expected))
    write_manifest(out, results.name, [p.name for p in out.iterdir() if p.name != MANIFEST])
    return index


def write_charts(data, out: Path) -> list:
    """Write the PNG (and CSV) of every chart section that draws something from `data`, and the further PNGs
    it draws from the same rows (`ChartSection.pngs`: the stitching plot's one per donor pair); return the
    sections' charts for the page, each titled with its section's title in lines that fit the page."""
    charts = []
    for section in chart_sections():
        rows = section.data(data)
        if section.drawn(rows):  # rows, and the data varies along the section's axis
            chart = section.report_chart(rows)
            _png(chart, out / section.png)
            if section.csv:
                rows.to_csv(out / section.csv, index=False)
            charts.append(chart.properties(title=wrap_title(section.title)))
            for name, more in (section.pngs(rows) if section.pngs else {}).items():
                _png(more, out / name)
    return charts


def write_tables(data, out: Path) -> list[str]:
    """Write the CSV (and Markdown) of every table section that has rows (or is shown `always`); return the
    HTML of those the page shows, each under its title."""
    html_tables = []
    for section in table_sections():
        rows = section.data(data)
        if len(rows) and section.shown is not None and not section.shown(rows):
            continue
        if section.csv and (len(rows) or section.always):
            rows.to_csv(out / section.csv, index=False)
        if section.md and len(rows):
            (out / section.md).write_text(markdown_table(rows))
        if section.page and (len(rows) or section.always):
            intro = f"<p>{text}</p>" if (text := section.intro_for(rows)) else ""
            columns = shown_columns(rows, section.columns or list(rows.columns))
            html_tables.append(f"<h2>{section.title}</h2>{intro}" + table(rows, columns))
    return html_tables


def shown_columns(rows: pd.DataFrame, columns: list[str]) -> list[str]:
    """The page's columns of a table: `columns` but those no row has a value in (robust accuracy of a study
    that measured none, `donor_at_chance` empty where no donor is at chance); every column without rows. The
    CSV keeps them all."""
    if not len(rows):
        return columns
    return [c for c in columns if c not in rows or (rows[c].notna() & (rows[c].astype(str) != "")).any()]


STALE_COLUMNS = ["trial_id", "front", "end", "front_point", "end_point", "objective", "seed", "status"]
