"""The report's sections, in order: each chart or table is one entry of `CHARTS` or `TABLES` (title, which
rows of the report's data, how to draw them, the files to write). `analysis.report` draws them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import altair as alt
import pandas as pd

from . import cka, curves, examples, grids, robustness, senders
from .charts import (
    class_collapse_grid,
    cross_task_grid,
    donor_curves_chart,
    heatmap_grid,
    stitching_grid,
    tsne_chart,
)
from .donors import mark_trials
from .energies import energy_density_chart, energy_rows
from .matrices import agreement_table, generalisation

if TYPE_CHECKING:
    from .report import ReportData

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
    "receiver_acc",
    "robust_acc",
    "most_frequent_class_ratio",
    "dm_residual",
    "time_fit_s",
    "time_total_s",
    "donor_at_chance",
]
DONOR_COLUMNS = [
    "donor",
    "arch",
    "dataset",
    "training",
    "train_eps",
    "beta",
    "epochs",
    "freeze",
    "train_size",
    "eval_dataset",
    "test_size",
    "clean_acc",
    "robust_acc",
    "n_eval_robust",
    "eps",
    "attack_iterations",
    "trained_now",
    "at_chance",
]


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
        lambda d: cka.matrices(d.similarity),
        cka.cka_grid,
        "cka_matrices.png",
        csv="cka_matrices.csv",
    ),
    ChartSection(
        "Threat models against each other (Cianfarani et al. 2022 Fig. 7): a row per reference network (L-inf,"
        " Snow), its own map first, then against each other threat model's network in the order L-inf, L2, JPEG,"
        " Gabor, Snow",
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
    ),
    ChartSection(
        "CKA between architectures at one robustness level (Jones et al. 2022 Figs 3-4): penultimate CKA of each"
        " architecture's donors (rows; inverted: their inversions) against each other's, a heatmap per level and"
        " data",
        lambda d: robustness.arch_matrices(d.similarity, d.donors),
        robustness.arch_matrix_chart,
        "arch_matrices.png",
        csv="arch_matrices.csv",
    ),
    ChartSection(
        "CKA on inverted data across robustness levels (Jones et al. 2022 Fig. 6): rows the level of the donor"
        " whose inversions both see; each cell over the architectures present at both its levels, labelled"
        " with its mean and (pair count)",
        lambda d: robustness.cka_across_levels(d.similarity, d.donors),
        robustness.across_levels_chart,
        "cka_across_levels.png",
        csv="cka_across_levels.csv",
    ),
    ChartSection(
        "Agreement with the head by robustness level (Jones et al. 2022 Figs 7-8): where body and head agree"
        " (correct, wrong) and where they disagree, mean over pairs of different donors with a 1-SE band",
        lambda d: robustness.agreement_curves(d.done, d.donors),
        robustness.agreement_curve_chart,
        "agreement_curves.png",
        csv="agreement_curves.csv",
    ),
    ChartSection(
        "Saliency similarity by robustness level (Jones et al. 2022 Fig. 5): mean +- 1 std over pairs of the"
        " architectures present at every level",
        lambda d: robustness.saliency_by_level(d.similarity, d.donors),
        lambda rows: robustness.level_chart(rows, "cosine", "std", None, "saliency cosine"),
        "saliency_by_level.png",
        csv="saliency_by_level.csv",
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
        " d(A, B), mean over units; <i>significant</i>: units with both one-sided p-values below 0.05;"
        " <i>constant</i>: units where the gap or the dissimilarity did not vary (no correlation, left out of the"
        " means; all of them: no mean).",
        csv="rank_correlations.csv",
        md="rank_correlations.md",
    ),
    TableSection(
        "Stitched accuracy at the first point, sender x receiver (Smith & Marcu 2024 Table C1)",
        lambda d: senders.first_point_table(d.trials, d.donors),
        "Mean over runs (initialisations and seeds); a row is a model type as sender, a column as receiver, one"
        " block per stitching dataset (stitched_on); base_acc: the type's own accuracy on the stitching test data;"
        " compatible R: the stitch at or above receiver R's own accuracy on those images (the paper's"
        " compatibility). Noise senders are in the next table.",
        csv="sender_receiver_first_point.csv",
        md="sender_receiver_first_point.md",
    ),
    TableSection(
        "Clustered noise into receivers at the first point (Smith & Marcu 2024 Section 4.2, C5)",
        lambda d: senders.first_point_table(d.trials, d.donors, noise=True),
        "Mean over runs; base_acc: the receivers' accuracy on the sweep's test images; compatible R: the stitch at"
        " or above receiver R's.",
        csv="noise_first_point.csv",
    ),
    TableSection(
        "Stitching from noise: stitcher and noise initialisations (Smith & Marcu 2024 C.2)",
        lambda d: senders.noise_initialisations(d.trials),
        "Noise senders with their own seed: the stitched accuracy over stitcher initialisations on one noise"
        " dataset, and over noise datasets with one initialisation (the paper: 40-80% over initialisations).",
        csv="noise_initialisations.csv",
        md="noise_initialisations.md",
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
        "CKA, Procrustes and SVCCA on the same representations (Cianfarani et al. 2022 B.1)",
        lambda d: cka.measures_compared(d.similarity),
        "Each pair of points under full-batch linear CKA, the orthogonal Procrustes distance (OPD: 0 for the same"
        " representation, lower is more similar) and SVCCA (mean canonical correlation of the 99%-variance"
        " reductions), on the same images; time_*_s: the seconds each took on the held activations.",
        csv="measures_compared.csv",
        md="measures_compared.md",
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
    TableSection(
        "Agreement with the head by robustness level (Jones et al. 2022 Figs 7-8)",
        lambda d: robustness.agreement_by_level(d.done, d.donors),
        "Pairs of two different donors trained at the same eps (0: plain), of the architectures present at every"
        " level; mean and standard error over pairs.",
        csv="agreement_by_level.csv",
        md="agreement_by_level.md",
    ),
    TableSection(
        "Block structure (Cianfarani et al. 2022 Fig. 2): mean CKA of a network with itself between points more"
        " than 20 apart",
        lambda d: cka.block_structure(d.similarity, d.donors),
        intro="Distant layers that represent alike make the bright squares of Fig. 2; `far_cka` is their mean CKA"
        " (`pairs`: how many ordered pairs of points are more than 20 apart), `mean_cka` the mean over every"
        " pair of distinct points.",
        csv="block_structure.csv",
    ),
    TableSection(
        "One threat model across budgets (Cianfarani et al. 2022 Fig. 30): two networks of one training method at"
        " different budgets, on benign images",
        lambda d: cka.budget_steps(d.similarity, d.donors),
        "`diagonal_cka`: the mean CKA at the same point of the two networks; `mean_cka`: over every pair of points."
        " Neighbouring budgets whose diagonal stays high: representations that change gradually with the budget.",
        csv="budget_steps.csv",
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
        "Trials",
        lambda d: mark_trials(d.done, d.donors).sort_values(["front", "end", "setting", "point_index"]),
        intro="`donor_at_chance` names a donor of the trial that ended training at chance accuracy: read its"
        " numbers with care.",
        columns=TRIAL_COLUMNS,
    ),
]
