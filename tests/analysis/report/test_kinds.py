"""Each shipped kind of work's part of the report lives in one module, `analysis/report/kinds/<kind>.py`, named
by the kind's `Kind.report`: the report gathers every kind's charts and tables from there, in the report's
order (each section's `order`), and draws what it drew when the sections were one list."""

from __future__ import annotations

import importlib
import json
import re

import pytest

from analysis.report.notebook import figures, tables
from analysis.report.sections import ChartSection, chart_sections
from analysis.report.table_sections import TABLES, TableSection, table_sections
from sweep.registry import KINDS
from tests.conftest import REPO

SHIPPED = ["donor", "trial", "reptest", "inversion", "similarity", "training_similarity", "tsne", "examples"]
KINDS_DIR = REPO / "analysis" / "report" / "kinds"

# The report's charts and tables in the order the page shows them (before the kinds held them: one list each).
CHART_ORDER = [
    "stitching",
    "most_frequent_class",
    "cross_task",
    "cka_matrices",
    "threat_grid",
    "eps_width_grid",
    "cka_within_networks",
    "cka_diagonals",
    "cka_epochs",
    "donor_curves",
    "donor_curves_mean",
    "cka_epoch_matrices",
    "sender_accuracy",
    "receiver_rank",
    "inversions",
    "energy_densities",
    "examples",
    "tsne",
    "cka_by_level",
    "arch_matrices",
    "cka_across_levels",
    "agreement_curves",
    "cka_across_levels_by_arch",
    "saliency_by_level",
    "layer_matrices",
]
TABLE_ORDER = [
    "Rank-correlation tests (Balogh & Jelasity 2025 Tables 2-3)",
    "Stitched accuracy at the first point, sender x receiver (Smith & Marcu 2024 Table C1)",
    "Clustered noise into receivers at the first point (Smith & Marcu 2024 Section 4.2, C5)",
    "Stitching from noise: stitcher and noise initialisations (Smith & Marcu 2024 C.2)",
    "Accuracy of each model type on its own test set (Smith & Marcu 2024 Table C2)",
    "Transfer robustness (Cianfarani et al. 2022 Fig. 5a)",
    "CKA, Procrustes and SVCCA on the same representations (Cianfarani et al. 2022 B.1)",
    "Unreadable results parts",
    "Layer identification (Balogh & Jelasity 2025 Table 1)",
    "Agreement with the end network after stitching (Jones et al. 2022 4.5, Figs 7-8)",
    "Agreement with the head by robustness level (Jones et al. 2022 Figs 7-8)",
    "Block structure (Cianfarani et al. 2022 Fig. 2): mean CKA of a network with itself between points more than"
    " 20 apart",
    "One threat model across budgets (Cianfarani et al. 2022 Fig. 30): two networks of one training method at"
    " different budgets, on benign images",
    "Stitched accuracy against each index at the same stitch point",
    "Donors",
    "Donors on training and test images (Cianfarani et al. 2022 Table 1)",
    "Failed trials",
    "Trials",
]


def _module(kind: str):
    return importlib.import_module(f"analysis.report.kinds.{kind}")


@pytest.mark.parametrize("kind", SHIPPED)
def test_each_shipped_kind_names_its_own_report_module(kind):
    assert (KINDS_DIR / f"{kind}.py").is_file()
    assert KINDS[kind].report == f"analysis.report.kinds.{kind}:sections"
    assert all(isinstance(s, ChartSection) for s in _module(kind).sections())


def test_every_report_module_is_a_registered_kinds():
    modules = {p.stem for p in KINDS_DIR.glob("*.py")} - {"__init__"}
    assert modules == set(SHIPPED) and set(SHIPPED) <= set(KINDS)


def test_the_report_gathers_every_kinds_charts_and_tables():
    charts, shown = chart_sections(), table_sections()
    for kind in SHIPPED:
        module = _module(kind)
        assert all(s in charts for s in module.sections()), kind
        assert all(s in shown for s in getattr(module, "tables", list)()), kind
    assert len(charts) == sum(len(_module(k).sections()) for k in SHIPPED)
    assert all(isinstance(s, TableSection) for s in shown) and all(s in shown for s in TABLES)


def test_the_sections_keep_the_report_order():
    assert [s.name for s in chart_sections()] == CHART_ORDER == figures()
    assert [s.title for s in table_sections() if s.page] == TABLE_ORDER
    assert tables() == [s.name for s in table_sections() if s.name]


def test_a_kind_without_an_order_is_drawn_after_every_ordered_section():
    from analysis.report.sections import in_order

    late = ChartSection("late", lambda d: d.trials, lambda rows: None, "late.png")
    first = ChartSection("first", lambda d: d.trials, lambda rows: None, "first.png", order=1)
    assert in_order([late, *chart_sections(), first]) == [first, *chart_sections(), late]


def test_no_kind_is_named_outside_its_own_report_module():
    """The kinds whose word would only be theirs: nowhere else in analysis/ (the kinds read by name elsewhere, the
    trials and donors most sections read, excepted)."""
    words = re.compile(r"\b(tsne|reptest|training_similarity)\b")
    named = [
        str(p.relative_to(REPO))
        for p in (REPO / "analysis").rglob("*.py")
        if p.parent != KINDS_DIR and words.search(p.read_text())
    ]
    assert named == []


@pytest.mark.slow  # a space planned, its results made up and its report drawn: seconds
def test_the_report_of_made_up_results_draws_the_same_files_and_sections(tmp_path):
    """The files and the page's sections of one shipped space's report, as the report drew them when its
    sections were two lists (a stitching study with representation tests: energies, layer matrices, rank
    correlations, one stitching plot per pair)."""
    from analysis.report.write import write_report
    from tests.synthetic import synthetic_results

    results = synthetic_results(REPO / "search_spaces" / "tlm_vs_dm_fmnist.yaml", tmp_path / "tlm_vs_dm_fmnist")
    index = write_report(results, tmp_path / "report")
    files = sorted(p.name for p in (tmp_path / "report").iterdir() if p.name != "manifest.json")
    assert files == [
        "agreement.csv",
        "agreement.md",
        "donor_curves.csv",
        "donor_curves.png",
        "donor_curves_mean.csv",
        "donor_curves_mean.png",
        "donor_generalisation.csv",
        "donor_generalisation.md",
        "donors.csv",
        "energy_densities.png",
        "index.html",
        "index_vs_accuracy.csv",
        "layer_identification.csv",
        "layer_identification.md",
        "layer_matrices.csv",
        "layer_matrices.png",
        "most_frequent_class.png",
        "rank_correlations.csv",
        "rank_correlations.md",
        "rank_correlations_per_unit.csv",
        "receiver_rank.csv",
        "receiver_rank.png",
        "stitching.png",
        "stitching_zoo_s0__zoo_s0.png",
        "stitching_zoo_s0__zoo_s1.png",
        "trials.csv",
    ]
    page = index.read_text()
    assert [h for h in re.findall(r"<h2>(.*?)</h2>", page) if h in TABLE_ORDER] == [
        "Rank-correlation tests (Balogh & Jelasity 2025 Tables 2-3)",
        "Layer identification (Balogh & Jelasity 2025 Table 1)",
        "Agreement with the end network after stitching (Jones et al. 2022 4.5, Figs 7-8)",
        "Stitched accuracy against each index at the same stitch point",
        "Donors",
        "Donors on training and test images (Cianfarani et al. 2022 Table 1)",
        "Trials",
    ]
    spec = json.loads(re.search(r"const spec = (\{.*\});\s*const embedOpt", page, flags=re.S).group(1))
    titles = [" ".join(c["title"]) if isinstance(c["title"], list) else c["title"] for c in spec["vconcat"]]
    drawn = [s for s in chart_sections() if " ".join(s.title.split()) in titles]
    assert [s.name for s in drawn] == [
        "stitching",
        "most_frequent_class",
        "donor_curves",
        "donor_curves_mean",
        "receiver_rank",
        "energy_densities",
        "layer_matrices",
    ]
