"""`stitchsweep report`: an HTML page that works offline (Vega JavaScript inlined) plus PNG charts and CSVs."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import altair as alt
import pandas as pd

from . import cka, senders
from .charts import (
    class_collapse_grid,
    cross_task_grid,
    donor_curves_chart,
    heatmap_grid,
    is_cross_task,
    setting_label,
    stitching_grid,
)
from .load import load
from .page import MANIFEST, claim_folder, markdown_table, page, table, write_manifest
from .stats import correlation_table, rank_correlations
from .store.storage import Loc, open_root
from .tables import agreement_table, generalisation, layer_identification, long_matrices

TRIAL_COLUMNS = [
    "trial_id",
    "front",
    "end",
    "dataset",
    "front_point",
    "end_point",
    "setting",
    "seed",
    "clean_acc",
    "relative_acc",
    "robust_acc",
    "most_frequent_class_ratio",
    "dm_residual",
    "time_fit_s",
    "time_total_s",
]
DONOR_COLUMNS = [
    "donor",
    "arch",
    "dataset",
    "training",
    "train_eps",
    "beta",
    "epochs",
    "train_size",
    "eval_dataset",
    "test_size",
    "clean_acc",
    "robust_acc",
    "n_eval_robust",
    "eps",
    "attack_iterations",
    "trained_now",
]


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


@dataclass(frozen=True)
class ChartSection:
    """A chart of the report: drawn when `data` selects any rows, saved as `png` (and `csv`)."""

    title: str
    data: Callable[[ReportData], pd.DataFrame]
    chart: Callable[[pd.DataFrame], alt.TopLevelMixin]
    png: str
    csv: str | None = None


@dataclass(frozen=True)
class TableSection:
    """A table of the report: shown when `data` has rows, saved as `csv` (and `md`)."""

    title: str
    data: Callable[[ReportData], pd.DataFrame]
    intro: str = ""
    columns: list[str] | None = None  # None: every column
    csv: str | None = None
    md: str | None = None


# The report, in order. A new plot or table is one function and one entry here.
CHARTS = [
    ChartSection("Stitching plots", lambda d: d.same_task, stitching_grid, "stitching.png"),
    ChartSection(
        "Class collapse: most frequent class ratio", lambda d: d.done, class_collapse_grid, "most_frequent_class.png"
    ),
    ChartSection("Cross-task stitching", lambda d: d.cross_task, cross_task_grid, "cross_task.png"),
    ChartSection(
        "CKA without stitching (Cianfarani et al. 2022): every point of A against every point of B",
        lambda d: cka.done(d.similarity),
        cka.cka_grid,
        "cka_matrices.png",
        csv="cka_matrices.csv",
    ),
    ChartSection(
        "CKA within networks side by side (Cianfarani et al. 2022 Figs 2-3): rows are architectures (widths),"
        " columns training methods and eps, plain first",
        lambda d: cka.within_networks(d.similarity, d.donors),
        cka.within_grid,
        "cka_within_networks.png",
    ),
    ChartSection(
        "CKA at the same point, benign vs adversarial and across networks (Cianfarani et al. 2022 Figs 4-5)",
        lambda d: cka.diagonals(d.similarity),
        cka.diagonal_chart,
        "cka_diagonals.png",
    ),
    ChartSection(
        "CKA with the final epoch across training (Cianfarani et al. 2022 Fig. 6; mean over each group's units)",
        lambda d: cka.epoch_curves(d.training_similarity),
        cka.epoch_curve_chart,
        "cka_epochs.png",
        csv="cka_epochs.csv",
    ),
    ChartSection(
        "Donor training curves: training, validation and adversarial validation loss per epoch",
        lambda d: d.donor_curves,
        donor_curves_chart,
        "donor_curves.png",
        csv="donor_curves.csv",
    ),
    ChartSection(
        "Epoch x epoch CKA per layer (Cianfarani et al. 2022 Fig. 25)",
        lambda d: cka.epoch_matrices(d.training_similarity),
        cka.epoch_matrix_chart,
        "cka_epoch_matrices.png",
    ),
    ChartSection(
        "Stitched accuracy by sender and receiver (Smith & Marcu 2024 Figs 1b, C5a, C6a): bands min-max over"
        " runs, dashed: the receiver's accuracy on the stitching data, 'whole': the receiver on its own test set",
        lambda d: senders.by_point(d.trials, d.donors),
        senders.accuracy_chart,
        "sender_accuracy.png",
        csv="sender_accuracy.csv",
    ),
    ChartSection(
        "Receiver rank after the stitch (Smith & Marcu 2024 Figs 1c, C5b, C6b): bands +-1 std over runs,"
        " 'baseline': the receiver fed by its own front",
        lambda d: senders.ranks(d.trials, d.donors),
        senders.rank_chart,
        "receiver_rank.png",
        csv="receiver_rank.csv",
    ),
    ChartSection(
        "Layer-by-layer matrices (rows: front layer, columns: end layer)",
        lambda d: d.matrices,
        heatmap_grid,
        "layer_matrices.png",
        csv="layer_matrices.csv",
    ),
]
TABLES = [
    TableSection(
        "Rank-correlation tests (Balogh & Jelasity 2025 Tables 2-3)",
        lambda d: d.correlations,
        "Kendall's tau and Spearman's rho between the probing gap |F(A) - F(B)| and each dissimilarity"
        " d(A, B), mean over units; <i>significant</i>: units with both one-sided p-values below 0.05.",
        csv="rank_correlations.csv",
        md="rank_correlations.md",
    ),
    TableSection(
        "Stitched accuracy at the first point, sender x receiver (Smith & Marcu 2024 Table C1)",
        lambda d: senders.first_point_table(d.trials, d.donors),
        "Mean over runs (initialisations and seeds); a row is a model type as sender, a column as receiver;"
        " base_acc: the type's own accuracy on the stitching test data.",
        csv="sender_receiver_first_point.csv",
        md="sender_receiver_first_point.md",
    ),
    TableSection(
        "Accuracy of each model type on its own test set (Smith & Marcu 2024 Table C2)",
        lambda d: senders.own_accuracy_table(d.trials, d.donors),
        "Mean over the type's initialisations.",
        csv="model_accuracy.csv",
        md="model_accuracy.md",
    ),
    TableSection(
        "Transfer robustness (Cianfarani et al. 2022 Fig. 5a)",
        lambda d: cka.transfer_matrix(d.similarity),
        "Accuracy of each target network (columns) on adversarial examples crafted against each source (rows).",
        csv="transfer_matrix.csv",
        md="transfer_matrix.md",
    ),
    TableSection(
        "Unreadable results parts",
        lambda d: d.problems,
        "Skipped: these files could not be read as results (rerun <code>stitchsweep resume</code> to"
        " recompute their trials).",
        ["path", "kind", "error"],
        csv="problems.csv",
    ),
    TableSection(
        "Layer identification (Balogh & Jelasity 2025 Table 1)",
        lambda d: d.identification,
        "Share of front layers whose most similar end layer, by each measure, is the corresponding one"
        " (intra: a donor with itself; inter: two donors of one architecture).",
        csv="layer_identification.csv",
        md="layer_identification.md",
    ),
    TableSection(
        "Agreement with the end network after stitching (Jones et al. 2022 4.5, Figs 7-8)",
        lambda d: agreement_table(d.done),
        "Share of test images on which the stitched network predicts what the end network does: overall, where"
        " both donors give the correct label, the same wrong label, or different labels; mean and standard"
        " error over the trials stitching two different donors.",
        csv="agreement.csv",
        md="agreement.md",
    ),
    TableSection("Donors", lambda d: d.donors, columns=DONOR_COLUMNS, csv="donors.csv"),
    TableSection(
        "Donors on training and test images (Cianfarani et al. 2022 Table 1)",
        lambda d: generalisation(d.donors),
        "Benign and robust accuracy on the first training images and on the test images (the donor's own"
        " evaluation: as many images, the same attack), and the gaps (train - test).",
        csv="donor_generalisation.csv",
        md="donor_generalisation.md",
    ),
    TableSection(
        "Failed trials",
        lambda d: d.failed,
        columns=["trial_id", "front", "end", "front_point", "end_point", "setting", "error"],
    ),
    TableSection(
        "Trials", lambda d: d.done.sort_values(["front", "end", "setting", "point_index"]), columns=TRIAL_COLUMNS
    ),
]


def write_report(results: str | Path | Loc, out: str | Path, expected: dict | None = None) -> Path:
    """Write into `out`: `index.html` and the files of every section of CHARTS and TABLES that has data
    (`stitching.png` with one `stitching_<front>__<end>.png` per pair, `most_frequent_class.png`,
    `cross_task.png`, `layer_matrices.png`/`.csv`, `layer_identification.csv`/`.md`, `rank_correlations*`,
    `problems.csv`), plus `trials.csv` and `donors.csv`. Returns the HTML path.

    `expected` (what `stitchsweep report` passes: the sweep's `space.yaml` read by the engine) holds per kind
    of work its counts (`kinds`: name -> {noun, total, done, failed, pending, blocked}) and the trial ids of
    the space (`trial_ids`): the page's header then says how much of the sweep is recorded, and trials no
    longer in the space are listed apart (`stale_trials.csv`) instead of being drawn."""
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
    names = ("donors", "problems", "reptests", "similarity", "training_similarity", "donor_curves")
    return ReportData(results.name, trials, *(tables[n] for n in names)), stale


STALE_COLUMNS = ["trial_id", "front", "end", "front_point", "end_point", "objective", "seed", "status"]


def _split_stale(trials: pd.DataFrame, expected: dict | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the trials of the space, those no longer in it); all trials when the space is not known."""
    if expected is None or "trial_ids" not in expected or trials.empty:
        return trials, trials.iloc[0:0]
    known = trials["trial_id"].isin(set(expected["trial_ids"]))
    return trials[known], trials[~known]
