"""The report's charts, in order: each is one entry of `CHARTS` (title, which rows of the report's data, how to
draw them, the files to write); the tables are `analysis.report.table_sections.TABLES`. `analysis.report.write` draws
both."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import altair as alt
import pandas as pd

from analysis.charts import cka, curves, examples, grids, per_point, robustness, senders
from analysis.charts.energies import energy_density_chart, energy_rows
from analysis.charts.per_point import same_layer
from analysis.charts.stitching import (
    class_collapse_grid,
    collapse_trials,
    cross_task_grid,
    donor_curves_chart,
    heatmap_grid,
    stitching_grid,
    tsne_chart,
)

if TYPE_CHECKING:
    from analysis.report.data import ReportData


@dataclass(frozen=True)
class ChartSection:
    """A chart of the report: drawn when `data` selects any rows, saved as `png` (and `csv`)."""

    title: str
    data: Callable[[ReportData], pd.DataFrame]
    chart: Callable[[pd.DataFrame], alt.TopLevelMixin]
    png: str
    csv: str | None = None
    # the sweep's report draws it only when this holds of its rows (its data varies along the section's axis);
    # a paper's page draws its items whatever they hold
    shown: Callable[[pd.DataFrame], bool] | None = None
    # the sweep's report's drawing where it differs from the paper's (`chart`, which a paper's page keeps)
    own: Callable[[pd.DataFrame], alt.TopLevelMixin] | None = None

    @property
    def name(self) -> str:
        """What a notebook asks for it by (`analysis.figure`): its PNG's stem."""
        return self.png.rsplit(".", 1)[0]

    def drawn(self, rows: pd.DataFrame) -> bool:
        """Whether the sweep's report draws it from `rows`: some rows, and its condition holds."""
        return bool(len(rows)) and (self.shown is None or self.shown(rows))

    def report_chart(self, rows: pd.DataFrame) -> alt.TopLevelMixin:
        """The sweep's report's drawing of `rows`: `own` where the section has one, else `chart`."""
        return (self.own or self.chart)(rows)


def varies(*columns: str) -> Callable[[pd.DataFrame], bool]:
    """A section's condition: its rows hold more than one value of some of `columns` (e.g. robustness levels:
    a curve over one level is one dot)."""
    return lambda rows: any(c in rows and rows[c].nunique() > 1 for c in columns)


# The report, in order. A new plot or table is one function and one entry here.
CHARTS = [
    ChartSection(
        "Stitching plots: a row per donor pair, every setting in one panel (dashed: the donors' own accuracies),"
        " beside it each index the trials measured at their stitch point, titled with its rank correlation"
        " (Spearman's rho) with the accuracy across the points",
        lambda d: same_layer(d.same_task),  # a pair stitched cross-layer only is the layer matrices'
        stitching_grid,
        "stitching.png",
        own=per_point.overlay_grid,
    ),
    ChartSection(
        "Class collapse: most frequent class ratio",
        lambda d: collapse_trials(d.done),
        class_collapse_grid,
        "most_frequent_class.png",
    ),
    ChartSection("Cross-task stitching", lambda d: same_layer(d.cross_task), cross_task_grid, "cross_task.png"),
    ChartSection(
        "CKA without stitching (Cianfarani et al. 2022): every point of A against every point of B",
        lambda d: cka.matrices(d.similarity),
        cka.cka_grid,
        "cka_matrices.png",
        csv="cka_matrices.csv",
        own=cka.cka_grid_to_data,
    ),
    ChartSection(
        "Threat models against each other (Cianfarani et al. 2022 Fig. 7): a row per reference network (L-inf,"
        " Snow), its own map first, then against each other threat model's network at its main budget in the order"
        " L-inf, L2, JPEG, Gabor, Snow",
        lambda d: grids.threat_rows(d.similarity, d.donors),
        grids.threat_grid,
        "threat_grid.png",
    ),
    ChartSection(
        "Training budget by width (Cianfarani et al. 2022 Fig. 3): each plain and PGD network with itself, a row per"
        " budget (plain first), a column per width",
        lambda d: grids.eps_width_rows(d.similarity, d.donors),
        grids.eps_width_grid,
        "eps_width_grid.png",
    ),
    ChartSection(
        "CKA within networks side by side (Cianfarani et al. 2022 Figs 2-3): rows are architectures (widths),"
        " columns training methods and eps, plain first",
        lambda d: cka.within_networks(d.similarity, d.donors),
        cka.within_grid,
        "cka_within_networks.png",
    ),
    ChartSection(
        "CKA at the same point (Cianfarani et al. 2022 Fig. 4: a network's benign vs adversarial representations;"
        " Figs 5b-d: a source vs a target on the source's adversarial images), a column per point family",
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
        "Training curves averaged over seeds (Cianfarani et al. 2022 Fig. 6's losses): donors of one recipe but"
        " their seed, mean per epoch with an interval over them",
        lambda d: curves.mean_curves(d.donor_curves, d.donors),
        curves.mean_curve_chart,
        "donor_curves_mean.png",
        csv="donor_curves_mean.csv",
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
        shown=varies("sender", "receiver"),  # one model type: the stitching plots above say it all
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
        "Inverted images (Jones et al. 2022 Fig. 2; Balogh & Jelasity 2023 Figs 9, 27): the targets, then each"
        " network's inversions of them",
        lambda d: robustness.inversion_images(d.root, d.inversions) if d.root is not None else pd.DataFrame(),
        robustness.inversion_grid,
        "inversions.png",
    ),
    ChartSection(
        "Balogh & Jelasity 2025 Fig. 1c: energies at the first stitch point of one network (its own"
        " in-distribution and outlier samples on top; stitched into it from every layer, intra-network, TLM, below)",
        lambda d: energy_rows(d.trials, d.energies),
        energy_density_chart,
        "energy_densities.png",
    ),
    ChartSection(
        "Example pictures (Smith & Marcu 2024 Fig. 1a, Figs A1-A2; Cianfarani et al. 2022 Fig. 8): images of each"
        " class, colour maps, clustered-noise samples as feature maps, and images attacked under each threat model"
        " with their perturbations (magnified)",
        lambda d: examples.pictures(d.examples),
        examples.examples_chart,
        "examples.png",
    ),
    ChartSection(
        "t-SNE of the representations (Balogh & Jelasity 2023 Fig. 7): a row per network, a column per point",
        lambda d: d.tsne[d.tsne["status"] == "done"] if len(d.tsne) else d.tsne,
        tsne_chart,
        "tsne.png",
    ),
    ChartSection(
        "CKA at the penultimate layer by robustness level, natural vs inverted data (Jones et al. 2022 Figs 1, 3,"
        " 4): mean +- 1 std over every pair of different donors of the architectures present at every level (the"
        " CSV: pairs and architectures per point)",
        lambda d: robustness.cka_by_level(d.similarity, d.donors),
        robustness.cka_level_chart,
        "cka_by_level.png",
        csv="cka_by_level.csv",
        shown=varies("eps"),
    ),
    ChartSection(
        "CKA between architectures at one robustness level (Jones et al. 2022 Figs 3-4): penultimate CKA of each"
        " architecture's donors (rows; inverted: their inversions) against each other's, a heatmap per level and"
        " data",
        lambda d: robustness.arch_matrices(d.similarity, d.donors),
        robustness.arch_matrix_chart,
        "arch_matrices.png",
        csv="arch_matrices.csv",
        shown=varies("a_arch", "b_arch"),
    ),
    ChartSection(
        "CKA on inverted data across robustness levels (Jones et al. 2022 Fig. 6): rows the level of the donor"
        " whose inversions both see; each cell over the architectures present at both its levels, labelled"
        " with its mean and (pair count)",
        lambda d: robustness.cka_across_levels(d.similarity, d.donors),
        robustness.across_levels_chart,
        "cka_across_levels.png",
        csv="cka_across_levels.csv",
        shown=varies("a_eps", "b_eps"),
    ),
    ChartSection(
        "Agreement with the head by robustness level (Jones et al. 2022 Figs 7-8): where body and head agree"
        " (correct, wrong) and where they disagree, mean over pairs of different donors with a 1-SE band",
        lambda d: robustness.agreement_curves(d.done, d.donors),
        robustness.agreement_curve_chart,
        "agreement_curves.png",
        csv="agreement_curves.csv",
        shown=varies("eps"),
    ),
    ChartSection(
        "CKA on inverted data across robustness levels by architecture pair (Jones et al. 2022 Fig. 6's grid): outer"
        " rows and columns the architectures, inside each block the levels",
        lambda d: robustness.across_levels_by_arch(d.similarity, d.donors),
        robustness.across_levels_grid,
        "cka_across_levels_by_arch.png",
        csv="cka_across_levels_by_arch.csv",
        shown=varies("a_eps", "b_eps"),
    ),
    ChartSection(
        "Saliency similarity by robustness level (Jones et al. 2022 Fig. 5): mean +- 1 std over pairs of the"
        " architectures present at every level",
        lambda d: robustness.saliency_by_level(d.similarity, d.donors),
        lambda rows: robustness.level_chart(rows, "cosine", "std", None, "saliency cosine"),
        "saliency_by_level.png",
        csv="saliency_by_level.csv",
        shown=varies("eps"),
    ),
    ChartSection(
        "Layer-by-layer matrices (rows: front layer, columns: end layer)",
        lambda d: d.matrices,
        heatmap_grid,
        "layer_matrices.png",
        csv="layer_matrices.csv",
    ),
]


def chart_sections() -> list[ChartSection]:
    """The report's charts: `CHARTS`, then those each registered kind of work declares for its table
    (`Kind.report`: sections, or the "package.module:name" of a list of them), in registration order."""
    from sweep.registry import KINDS, resolve

    out = list(CHARTS)
    for kind in KINDS.values():
        if kind.report is not None:
            declared = resolve(kind.report) if isinstance(kind.report, str) else kind.report
            out += list(declared() if callable(declared) else declared)
    return out
