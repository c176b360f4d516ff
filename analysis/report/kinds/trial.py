"""The stitching trials' part of the report: the stitching plots (Balogh & Jelasity 2023), class collapse,
cross-task stitching, senders and receivers (Smith & Marcu 2024), energies (Balogh & Jelasity 2025), agreement
by robustness level (Jones et al. 2022), the layer-by-layer matrices; and their tables."""

from __future__ import annotations

import re

import pandas as pd

from analysis.charts import per_point, robustness, senders
from analysis.charts.energies import energy_density_chart, energy_rows
from analysis.charts.per_point import same_layer
from analysis.charts.stitching import (
    class_collapse_grid,
    collapse_trials,
    cross_task_grid,
    heatmap_grid,
    stitching_grid,
)
from analysis.donors import mark_trials
from analysis.matrices import agreement_table, layer_identification, long_matrices
from analysis.report.data import ReportData
from analysis.report.sections import ChartSection, varies
from analysis.report.table_sections import TableSection
from sweep.store.layout import ENERGIES_DIR

COLUMNS = [
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
    "receiver_acc",
    "robust_acc",
    "most_frequent_class_ratio",
    "dm_residual",
    "time_fit_s",
    "time_total_s",
    "donor_at_chance",
]


def pair_pngs(stitched: pd.DataFrame) -> dict:
    """One stitching plot per donor pair stitched at the same points (`stitching_<front>__<end>.png`)."""
    out = {}
    for pair in stitched[["front", "end"]].drop_duplicates().itertuples(index=False):
        one = stitched[(stitched["front"] == pair.front) & (stitched["end"] == pair.end)]
        out[re.sub(r"[^A-Za-z0-9_.-]+", "_", f"stitching_{pair.front}__{pair.end}") + ".png"] = stitching_grid(one)
    return out


def cross_task_drawing(trials: pd.DataFrame):
    """The cross-task pairs' stitching plots: where the trials measured indices (the shortcut testbed of
    objectives_fmnist.yaml: Correlated and Digit donors, each trained on its own variant), a row per pair with
    every setting's accuracy and the indices beside it, titled with their rank correlations, as the same-task
    pairs' (`per_point.overlay_grid`); else a panel per setting (`cross_task_grid`)."""
    if not per_point.indices(trials):
        return cross_task_grid(trials)
    # the setting named by its objective and stitching data (its sizes and layouts would fill the titles)
    return per_point.overlay_grid(trials.assign(setting=trials["setting"].str.replace(_SIZES, "", regex=True)))


_SIZES = r" (?:train_size|val_size|test_size|pwcca_layout|opd_layout)=\S+"


def matrices(data: ReportData) -> pd.DataFrame:
    """Layer-by-layer matrices, when some front layer was stitched to more than one end layer."""
    long = long_matrices(data.done) if len(data.done) else pd.DataFrame()
    cross_layer = (
        len(long) and long.groupby(["front", "end", "measure", "front_point"])["end_point"].nunique().max() > 1
    )
    return long if cross_layer else pd.DataFrame()


def identification(data: ReportData) -> pd.DataFrame:
    return layer_identification(data.done) if len(data.done) else pd.DataFrame()


CHARTS = [
    ChartSection(
        "Stitching plots: a row per donor pair, every setting in one panel (dashed: the donors' own accuracies),"
        " beside it each index the trials measured at their stitch point, titled with its rank correlation"
        " (Spearman's rho) with the accuracy across the points",
        lambda d: same_layer(d.same_task),  # a pair stitched cross-layer only is the layer matrices'
        stitching_grid,
        "stitching.png",
        own=per_point.overlay_grid,
        order=10,
        pngs=pair_pngs,
    ),
    ChartSection(
        "Class collapse: most frequent class ratio",
        lambda d: collapse_trials(d.done),
        class_collapse_grid,
        "most_frequent_class.png",
        order=20,
    ),
    ChartSection(
        "Cross-task stitching (where the trials measured indices: each beside the accuracies, as above)",
        lambda d: same_layer(d.cross_task),
        cross_task_grid,
        "cross_task.png",
        own=cross_task_drawing,
        order=30,
    ),
    ChartSection(
        "Stitched accuracy by sender and receiver (Smith & Marcu 2024 Figs 1b, C5a, C6a): bands min-max over"
        " runs, dashed: the receiver's accuracy on the stitching data, 'whole': the receiver on its own test set",
        lambda d: senders.by_point(d.trials, d.donors),
        senders.accuracy_chart,
        "sender_accuracy.png",
        csv="sender_accuracy.csv",
        shown=varies("sender", "receiver"),  # one model type: the stitching plots above say it all
        order=130,
    ),
    ChartSection(
        "Receiver rank after the stitch (Smith & Marcu 2024 Figs 1c, C5b, C6b): bands +-1 std over runs,"
        " 'baseline': the receiver fed by its own front",
        lambda d: senders.ranks(d.trials, d.donors),
        senders.rank_chart,
        "receiver_rank.png",
        csv="receiver_rank.csv",
        order=140,
    ),
    ChartSection(
        "Balogh & Jelasity 2025 Fig. 1c: energies at the first stitch point of one network (its own"
        " in-distribution and outlier samples on top; stitched into it from every layer, intra-network, TLM,"
        " below)",
        lambda d: energy_rows(d.trials, d.table(ENERGIES_DIR)),
        energy_density_chart,
        "energy_densities.png",
        order=160,
    ),
    ChartSection(
        "Agreement with the head by robustness level (Jones et al. 2022 Figs 7-8): where body and head agree"
        " (correct, wrong) and where they disagree, mean over pairs of different donors with a 1-SE band",
        lambda d: robustness.agreement_curves(d.done, d.donors),
        robustness.agreement_curve_chart,
        "agreement_curves.png",
        csv="agreement_curves.csv",
        shown=varies("eps"),
        order=220,
    ),
    ChartSection(
        "Layer-by-layer matrices (rows: front layer, columns: end layer)",
        lambda d: d.derived(matrices),
        heatmap_grid,
        "layer_matrices.png",
        csv="layer_matrices.csv",
        order=250,
    ),
]


def _chance_note(rows: pd.DataFrame) -> str:
    """The trials table's note on donors at chance, where some trial has one."""
    if "donor_at_chance" not in rows or not (rows["donor_at_chance"].fillna("") != "").any():
        return ""
    return (
        "<i>donor_at_chance</i> names a donor of the trial that ended training at chance accuracy: read its"
        " numbers with care."
    )


TABLES = [
    TableSection(
        "Stitched accuracy at the first point, sender x receiver (Smith & Marcu 2024 Table C1)",
        lambda d: senders.first_point_table(d.trials, d.donors),
        "Mean over runs (initialisations and seeds); a row is a model type as sender, a column as receiver, one"
        " block per stitching dataset (stitched_on); base_acc: the type's own accuracy on the stitching test data;"
        " compatible R: the stitch at or above receiver R's own accuracy on those images (the paper's"
        " compatibility). Noise senders are in the next table.",
        csv="sender_receiver_first_point.csv",
        md="sender_receiver_first_point.md",
        shown=varies("sender"),
        order=20,
    ),
    TableSection(
        "Clustered noise into receivers at the first point (Smith & Marcu 2024 Section 4.2, C5)",
        lambda d: senders.first_point_table(d.trials, d.donors, noise=True),
        "Mean over runs; base_acc: the receivers' accuracy on the sweep's test images; compatible R: the stitch at"
        " or above receiver R's.",
        csv="noise_first_point.csv",
        order=30,
    ),
    TableSection(
        "Stitching from noise: stitcher and noise initialisations (Smith & Marcu 2024 C.2)",
        lambda d: senders.noise_initialisations(d.trials),
        "Noise senders with their own seed: the stitched accuracy over stitcher initialisations on one noise"
        " dataset, and over noise datasets with one initialisation (the paper: 40-80% over initialisations).",
        csv="noise_initialisations.csv",
        md="noise_initialisations.md",
        order=40,
    ),
    TableSection(
        "Accuracy of each model type on its own test set (Smith & Marcu 2024 Table C2)",
        lambda d: senders.own_accuracy_table(d.trials, d.donors),
        "Mean over the type's initialisations.",
        csv="model_accuracy.csv",
        md="model_accuracy.md",
        shown=varies("model"),
        order=50,
    ),
    TableSection(
        "Layer identification (Balogh & Jelasity 2025 Table 1)",
        lambda d: d.derived(identification),
        "Share of front layers whose most similar end layer, by each measure, is the corresponding one"
        " (intra: a donor with itself; inter: two donors of one architecture).",
        csv="layer_identification.csv",
        md="layer_identification.md",
        order=90,
    ),
    TableSection(
        "Agreement with the end network after stitching (Jones et al. 2022 4.5, Figs 7-8)",
        lambda d: agreement_table(d.done),
        "Share of test images on which the stitched network predicts what the end network does: overall, where"
        " both donors give the correct label, the same wrong label, or different labels; mean and standard"
        " error over the trials stitching two different donors.",
        csv="agreement.csv",
        md="agreement.md",
        order=100,
    ),
    TableSection(
        "Agreement with the head by robustness level (Jones et al. 2022 Figs 7-8)",
        lambda d: robustness.agreement_by_level(d.done, d.donors),
        "Pairs of two different donors trained at the same eps (0: plain), of the architectures present at every"
        " level; mean and standard error over pairs.",
        csv="agreement_by_level.csv",
        md="agreement_by_level.md",
        shown=varies("eps"),
        order=110,
    ),
    TableSection(
        "Stitched accuracy against each index at the same stitch point",
        lambda d: per_point.correlations(d.done),
        "Per donor pair (cross-task pairs included), setting and index measured in the trials"
        " (<code>indices:</code>): Kendall's tau and"
        " Spearman's rho between the stitched accuracy (mean over seeds) and the index across the stitch points"
        " (<i>points</i>), one-sided towards more similar, more accurate, as in Balogh &amp; Jelasity 2025 Tables"
        " 2-3; <i>constant</i>: the accuracy or the index did not vary.",
        csv="index_vs_accuracy.csv",
        order=140,
    ),
    TableSection(
        "Failed trials",
        lambda d: d.failed,
        columns=["trial_id", "front", "end", "front_point", "end_point", "setting", "error"],
        order=170,
    ),
    TableSection(
        "Trials",
        lambda d: mark_trials(d.done, d.donors).sort_values(
            [c for c in ("front", "end", "point_index", "end_index", "setting", "seed") if c in d.done]
        ),
        intro=_chance_note,
        columns=COLUMNS,
        always=True,
        order=180,
    ),
]


def sections() -> list[ChartSection]:
    return list(CHARTS)


def tables() -> list[TableSection]:
    return list(TABLES)
