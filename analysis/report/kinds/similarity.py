"""The similarity units' part of the report (Cianfarani et al. 2022; Jones et al. 2022): CKA matrices, threat
models and training budgets against each other, CKA by robustness level and across architectures, saliency
similarity; transfer robustness and the measures compared."""

from __future__ import annotations

from analysis.charts import cka, grids, robustness
from analysis.report.sections import ChartSection, varies
from analysis.report.table_sections import TableSection

CHARTS = [
    ChartSection(
        "CKA without stitching (Cianfarani et al. 2022): every point of A against every point of B",
        lambda d: cka.matrices(d.of("similarity")),
        cka.cka_grid,
        "cka_matrices.png",
        csv="cka_matrices.csv",
        own=cka.cka_grid_to_data,
        order=40,
    ),
    ChartSection(
        "Threat models against each other (Cianfarani et al. 2022 Fig. 7): a row per reference network (L-inf,"
        " Snow), its own map first, then against each other threat model's network at its main budget in the"
        " order L-inf, L2, JPEG, Gabor, Snow",
        lambda d: grids.threat_rows(d.of("similarity"), d.donors),
        grids.threat_grid,
        "threat_grid.png",
        order=50,
    ),
    ChartSection(
        "Training budget by width (Cianfarani et al. 2022 Fig. 3): each plain and PGD network with itself, a row"
        " per budget (plain first), a column per width",
        lambda d: grids.eps_width_rows(d.of("similarity"), d.donors),
        grids.eps_width_grid,
        "eps_width_grid.png",
        order=60,
    ),
    ChartSection(
        "CKA within networks side by side (Cianfarani et al. 2022 Figs 2-3): rows are architectures (widths),"
        " columns training methods and eps, plain first",
        lambda d: cka.within_networks(d.of("similarity"), d.donors),
        cka.within_grid,
        "cka_within_networks.png",
        order=70,
    ),
    ChartSection(
        "CKA at the same point (Cianfarani et al. 2022 Fig. 4: a network's benign vs adversarial"
        " representations; Figs 5b-d: a source vs a target on the source's adversarial images), a column per"
        " point family",
        lambda d: cka.diagonals(d.of("similarity")),
        cka.diagonal_chart,
        "cka_diagonals.png",
        order=80,
    ),
    ChartSection(
        "CKA at the penultimate layer by robustness level, natural vs inverted data (Jones et al. 2022 Figs 1,"
        " 3, 4): mean +- 1 std over every pair of different donors of the architectures present at every level"
        " (the CSV: pairs and architectures per point)",
        lambda d: robustness.cka_by_level(d.of("similarity"), d.donors),
        robustness.cka_level_chart,
        "cka_by_level.png",
        csv="cka_by_level.csv",
        shown=varies("eps"),
        order=190,
    ),
    ChartSection(
        "CKA between architectures at one robustness level (Jones et al. 2022 Figs 3-4): penultimate CKA of"
        " each architecture's donors (rows; inverted: their inversions) against each other's, a heatmap per"
        " level and data",
        lambda d: robustness.arch_matrices(d.of("similarity"), d.donors),
        robustness.arch_matrix_chart,
        "arch_matrices.png",
        csv="arch_matrices.csv",
        shown=varies("a_arch", "b_arch"),
        order=200,
    ),
    ChartSection(
        "CKA on inverted data across robustness levels (Jones et al. 2022 Fig. 6): rows the level of the donor"
        " whose inversions both see; each cell over the architectures present at both its levels, labelled"
        " with its mean and (pair count)",
        lambda d: robustness.cka_across_levels(d.of("similarity"), d.donors),
        robustness.across_levels_chart,
        "cka_across_levels.png",
        csv="cka_across_levels.csv",
        shown=varies("a_eps", "b_eps"),
        order=210,
    ),
    ChartSection(
        "CKA on inverted data across robustness levels by architecture pair (Jones et al. 2022 Fig. 6's grid):"
        " outer rows and columns the architectures, inside each block the levels",
        lambda d: robustness.across_levels_by_arch(d.of("similarity"), d.donors),
        robustness.across_levels_grid,
        "cka_across_levels_by_arch.png",
        csv="cka_across_levels_by_arch.csv",
        shown=varies("a_eps", "b_eps"),
        order=230,
    ),
    ChartSection(
        "Saliency similarity by robustness level (Jones et al. 2022 Fig. 5): mean +- 1 std over pairs of the"
        " architectures present at every level",
        lambda d: robustness.saliency_by_level(d.of("similarity"), d.donors),
        lambda rows: robustness.level_chart(rows, "cosine", "std", None, "saliency cosine"),
        "saliency_by_level.png",
        csv="saliency_by_level.csv",
        shown=varies("eps"),
        order=240,
    ),
]


TABLES = [
    TableSection(
        "Transfer robustness (Cianfarani et al. 2022 Fig. 5a)",
        lambda d: cka.transfer_matrix(d.of("similarity")),
        "Accuracy of each target network (columns) on adversarial examples crafted against each source (rows).",
        csv="transfer_matrix.csv",
        md="transfer_matrix.md",
        order=60,
    ),
    TableSection(
        "CKA, Procrustes and SVCCA on the same representations (Cianfarani et al. 2022 B.1)",
        lambda d: cka.measures_compared(d.of("similarity")),
        "Each pair of points under full-batch linear CKA, the orthogonal Procrustes distance (OPD: 0 for the same"
        " representation, lower is more similar) and SVCCA (mean canonical correlation of the 99%-variance"
        " reductions, at most svcca_max_k directions each), on the same images; svcca_k_a, svcca_k_b: the"
        " directions each side kept; svcca_null: the SVCCA of independent data at those k and images (what"
        " SVCCA must exceed); time_*_s: the seconds each took on the held activations.",
        csv="measures_compared.csv",
        md="measures_compared.md",
        order=70,
    ),
    TableSection(
        "Block structure (Cianfarani et al. 2022 Fig. 2): mean CKA of a network with itself between points more"
        " than 20 apart",
        lambda d: cka.block_structure(d.of("similarity"), d.donors),
        intro="Distant layers that represent alike make the bright squares of Fig. 2; <i>far_cka</i> is their"
        " mean CKA (<i>pairs</i>: how many ordered pairs of points are more than 20 apart), <i>mean_cka</i> the"
        " mean over every pair of distinct points.",
        csv="block_structure.csv",
        order=120,
    ),
    TableSection(
        "One threat model across budgets (Cianfarani et al. 2022 Fig. 30): two networks of one training method at"
        " different budgets, on benign images",
        lambda d: cka.budget_steps(d.of("similarity"), d.donors),
        "<i>diagonal_cka</i>: the mean CKA at the same point of the two networks; <i>mean_cka</i>: over every pair"
        " of points."
        " Neighbouring budgets whose diagonal stays high: representations that change gradually with the budget.",
        csv="budget_steps.csv",
        order=130,
    ),
]


def sections() -> list[ChartSection]:
    return list(CHARTS)


def tables() -> list[TableSection]:
    return list(TABLES)
