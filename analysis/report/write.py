"""`stitchsweep report`: an HTML page that works offline (Vega JavaScript inlined) plus PNG charts and CSVs."""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

import altair as alt
import pandas as pd

from analysis.charts.stitching import is_cross_task, setting_label, stitching_grid
from analysis.matrices import layer_identification, long_matrices
from analysis.reading import load
from analysis.report.page import MANIFEST, claim_folder, markdown_table, page, table, write_manifest
from analysis.report.sections import CHARTS
from analysis.report.table_sections import TABLES
from analysis.stats import correlation_table, rank_correlations
from sweep.store.storage import Loc, open_root


def _png(chart, path: Path) -> None:
    import vl_convert

    path.write_bytes(vl_convert.vegalite_to_png(chart.to_dict(), scale=1.5))


@dataclass(frozen=True)
class ReportData:
    """What the sections draw from: every table of the results, prepared once."""

    name: str
    trials: pd.DataFrame
    donors: pd.DataFrame
    problems: pd.DataFrame
    reptests: pd.DataFrame
    similarity: pd.DataFrame
    training_similarity: pd.DataFrame
    donor_curves: pd.DataFrame
    inversions: pd.DataFrame = field(default_factory=pd.DataFrame)
    tsne: pd.DataFrame = field(default_factory=pd.DataFrame)
    energies: pd.DataFrame = field(default_factory=pd.DataFrame)
    examples: pd.DataFrame = field(default_factory=pd.DataFrame)
    root: Loc | None = None  # the results folder (files beside the tables: inverted images)

    def where(self, **settings) -> ReportData:
        """The same data restricted to rows whose columns equal `settings` (a list: any of its values), in every
        table that has those columns: e.g. `data.where(objective="tlm", front="zoo:plain_a")`."""
        tables = {}
        for f in dataclasses.fields(self):
            df = getattr(self, f.name)
            if isinstance(df, pd.DataFrame):
                for column, value in settings.items():
                    if column in df.columns:
                        df = df[df[column].isin(value if isinstance(value, (list, tuple, set)) else [value])]
            tables[f.name] = df
        return ReportData(**tables)

    @functools.cached_property
    def done(self) -> pd.DataFrame:
        return self.trials[self.trials["status"] == "done"]

    @functools.cached_property
    def failed(self) -> pd.DataFrame:
        return self.trials[self.trials["status"] == "failed"]

    @functools.cached_property
    def same_task(self) -> pd.DataFrame:
        return self.done[~is_cross_task(self.done)]

    @functools.cached_property
    def cross_task(self) -> pd.DataFrame:
        return self.done[is_cross_task(self.done)]

    @functools.cached_property
    def matrices(self) -> pd.DataFrame:
        """Layer-by-layer matrices, when some front layer was stitched to more than one end layer."""
        long = long_matrices(self.done) if len(self.done) else pd.DataFrame()
        cross_layer = (
            len(long) and long.groupby(["front", "end", "measure", "front_point"])["end_point"].nunique().max() > 1
        )
        return long if cross_layer else pd.DataFrame()

    @functools.cached_property
    def identification(self) -> pd.DataFrame:
        return layer_identification(self.done) if len(self.done) else pd.DataFrame()

    @functools.cached_property
    def correlations_per_unit(self) -> pd.DataFrame:
        return rank_correlations(self.reptests) if len(self.reptests) else pd.DataFrame()

    @functools.cached_property
    def correlations(self) -> pd.DataFrame:
        return correlation_table(self.correlations_per_unit) if len(self.reptests) else pd.DataFrame()


def write_report(results: str | Path | Loc, out: str | Path, expected: dict | None = None) -> Path:
    """Write into `out`: `index.html` and the files of every section of CHARTS and TABLES that has data
    (`stitching.png` with one `stitching_<front>__<end>.png` per pair, `most_frequent_class.png`,
    `cross_task.png`, `layer_matrices.png`/`.csv`, `layer_identification.csv`/`.md`, `rank_correlations*`,
    `problems.csv`), plus `trials.csv` and `donors.csv`. Returns the HTML path.

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
    charts = []
    for section in CHARTS:
        rows = section.data(data)
        if len(rows):
            chart = section.chart(rows)
            _png(chart, out / section.png)
            if section.csv:
                rows.to_csv(out / section.csv, index=False)
            charts.append(chart.properties(title=section.title))
    for pair in data.same_task[["front", "end"]].drop_duplicates().itertuples(index=False):
        one = data.same_task[(data.same_task["front"] == pair.front) & (data.same_task["end"] == pair.end)]
        _png(
            stitching_grid(one),
            out / (re.sub(r"[^A-Za-z0-9_.-]+", "_", f"stitching_{pair.front}__{pair.end}") + ".png"),
        )
    if len(data.reptests):
        data.correlations_per_unit.to_csv(out / "rank_correlations_per_unit.csv", index=False)
    html_tables = []
    for section in TABLES:
        rows = section.data(data)
        if section.csv and (len(rows) or section.title == "Donors"):
            rows.to_csv(out / section.csv, index=False)
        if section.md and len(rows):
            (out / section.md).write_text(markdown_table(rows))
        if len(rows) or section.title in ("Donors", "Trials"):
            intro = f"<p>{section.intro}</p>" if section.intro else ""
            html_tables.append(f"<h2>{section.title}</h2>{intro}" + table(rows, section.columns or list(rows.columns)))
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


def report_data(results, expected: dict | None = None) -> tuple[ReportData, pd.DataFrame]:
    """(every table of a results directory, prepared as the report draws it; the trials no longer in the
    space, when `expected` says which are)."""
    results = open_root(results)
    tables = load(results)
    trials, stale = _split_stale(tables["trials"], expected)
    trials = trials.assign(setting=setting_label(trials))
    names = (
        "donors",
        "problems",
        "reptests",
        "similarity",
        "training_similarity",
        "donor_curves",
        "inversions",
        "tsne",
        "energies",
        "examples",
    )
    return ReportData(results.name, trials, *(tables[n] for n in names), root=results), stale


STALE_COLUMNS = ["trial_id", "front", "end", "front_point", "end_point", "objective", "seed", "status"]


def _split_stale(trials: pd.DataFrame, expected: dict | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the trials of the space, those no longer in it); all trials when the space is not known."""
    if expected is None or "trial_ids" not in expected or trials.empty:
        return trials, trials.iloc[0:0]
    known = trials["trial_id"].isin(set(expected["trial_ids"]))
    return trials[known], trials[~known]
