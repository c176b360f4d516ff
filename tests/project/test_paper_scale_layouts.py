"""Every registered paper item that `runs`, built from the made-up results (`tests/synthetic.py`) of each of its
**paper-scale** spaces (a space whose header does not say "at a reduced scale"), both as the sweep's report
draws its sections (all of a section's rows) and as the paper's page draws it (`report --paper`: the rows the
registry's `where` keeps). Every drawing must build; where `PANELS` gives a figure's panels per row, both
drawings must have them, and where `POPULATION_CHECKS` has a check of an item's rows, both pass it. The spaces
in `LARGE` build only their checked items. `tests/project/test_paper_layouts.py` checks titles, axes and orders on
every space; this file checks what only the papers' scale shows (several entries of a space feeding one
section, as Cianfarani et al. Fig. 7's budget neighbours did)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import altair as alt
import pandas as pd
import pytest

from analysis.papers import Item, items, paper
from analysis.report.data import ReportData, report_data
from analysis.report.notebook import section
from analysis.report.paper import drawing_key, item_drawings, item_rows
from tests.conftest import REPO
from tests.synthetic import synthetic_results

pytestmark = pytest.mark.slow

OWN_FILES = ("own_checkpoints/",)  # spaces that read the user's own files do not load without them


def paper_scale(space: str) -> bool:
    """Whether `space` runs at the paper's scale: the rule `tests/scripts/paper_pages.py` applies (a reduced
    space says "at a reduced scale" in its header's first three lines)."""
    head = " ".join((REPO / "search_spaces" / space).read_text().splitlines()[:3])
    return "at a reduced scale" not in head


# Spaces too big to draw every item of in seconds (the seconds to make their results and draw all their
# items, on a 2-core x86-64 CPU shared with other jobs, 2026-11-29): only the items with a check below are
# built from them. Every item of them is still drawn on the paper's page by tests/project/test_paper_layouts.py.
LARGE = {
    "tlm_vs_dm_cifar10.yaml": 118,  # 7,040 trials; Balogh & Jelasity 2025 Fig. 1a alone 94 s
    "tlm_vs_dm_cifar10_vit.yaml": 127,  # 15,840 trials; Fig. 2 80 s, Table 1 47 s
    "stitching_cifar10_architectures.yaml": 117,  # 1,184 trials; Balogh & Jelasity 2023 Figs 14-19, 12-25 s each
}


def _cases() -> list[tuple[Item, str]]:
    """(item, paper-scale space) to build: every `runs` item's, but only the checked ones on a LARGE space."""
    checked = PANELS.keys() | POPULATION_CHECKS.keys()
    return [
        (it, space)
        for it in items()
        if it.status == "runs"
        for space in it.spaces
        if not space.startswith(OWN_FILES) and paper_scale(space)
        if space not in LARGE or (it.paper, it.item) in checked
    ]


def panels_per_row(spec: dict) -> list[int]:
    """The panels of each row of a grid drawn as a `vconcat` of `hconcat`s (a row that is one chart: 1)."""
    return [len(line.get("hconcat", [line])) for line in spec["vconcat"]]


def _fig7_one_main_network_per_threat_model(rows: pd.DataFrame, data: ReportData, where: str) -> None:
    """Fig. 7 at paper scale: each row holds one map per column (its own, then one per other threat model of
    L-inf, L2, JPEG, Gabor, Snow), each network trained against its column's threat model, and the report draws the
    very networks that the page (the `threats` entry, the paper's design) draws."""
    from analysis.charts import grids

    training = data.donors.drop_duplicates("ref").set_index("ref")["training"]
    units = rows.drop_duplicates(["row", "unit_id"])
    for ref, line in units.groupby("row"):
        expected = [0] + [1 + k for k, t in enumerate(grids.THREAT_ORDER) if t != training[ref]]
        assert sorted(line["column"]) == expected, f"Fig. 7 ({where}): {ref}'s columns {list(line.column)}"
        for b, column in zip(line["b"], line["column"], strict=True):
            assert column == 0 or training[b] == grids.THREAT_ORDER[column - 1], f"Fig. 7 ({where}): {b} in {column}"
    page = grids.threat_rows(data.similarity[data.similarity["name"] == "threats"], data.donors)
    drawn = set(units[["row", "b"]].itertuples(index=False))
    assert drawn == set(page.drop_duplicates(["row", "unit_id"])[["row", "b"]].itertuples(index=False)), where


# (paper, item) -> the panels per row its drawing must have, in the sweep's report and on the paper's page
PANELS: dict[tuple[str, str], list[int]] = {
    ("cianfarani-2022", "Fig. 7"): [5, 5],  # a row per reference network (L-inf, Snow), 5 maps each
}
# (paper, item) -> checks of the rows a drawing is made from (a population per cell, the number beside the
# paper's): called with (rows, the space's data, where: "report" or "page"); extend for an item's populations
POPULATION_CHECKS: dict[tuple[str, str], Callable[[pd.DataFrame, ReportData, str], None]] = {
    ("cianfarani-2022", "Fig. 7"): _fig7_one_main_network_per_threat_model,
}


CASES = _cases()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Paper-scale space -> its made-up results, made the first time a case asks."""
    made: dict[str, ReportData] = {}

    def get(space: str) -> ReportData:
        if space not in made:
            root = tmp_path_factory.mktemp("paper_scale") / space.replace("/", "_").removesuffix(".yaml")
            made[space] = report_data(synthetic_results(REPO / "search_spaces" / space, root))[0]
        return made[space]

    return get


def _check(it: Item, where: str, name: str, rows: pd.DataFrame, drawn, data: ReportData) -> None:
    """Build the drawing (a chart's Vega-Lite spec, validated by Altair), then check its layout and rows."""
    key = (it.paper, it.item)
    if not isinstance(drawn, pd.DataFrame):
        spec = drawn.to_dict()
        if key in PANELS:
            found = panels_per_row(spec)
            assert found == PANELS[key], f"{it.item} ({where}, {name}): panels per row {found}, not {PANELS[key]}"
    if key in POPULATION_CHECKS:
        POPULATION_CHECKS[key](rows, data, where)


DRAWN: set[tuple] = set()  # (where, drawing, space): several items draw a section the same way; build it once


@pytest.mark.parametrize("it,space", CASES, ids=[f"{it.paper}:{it.item}:{s}" for it, s in CASES])
def test_an_item_builds_from_its_paper_scale_space(it, space, results):
    data, short = results(space), paper(it.paper).short
    checked = (it.paper, it.item) in PANELS.keys() | POPULATION_CHECKS.keys()
    fresh = [n for n in it.sections if checked or ("page", drawing_key(it, n), space) not in DRAWN]
    with alt.data_transformers.disable_max_rows():
        for name in it.sections:  # the sweep's report: the section over all the space's rows
            s, key = section(name), ("report", name, space)
            # with no `where` the page draws the very same rows: built below
            if checked or (key not in DRAWN and (it.where or it.combine)):
                DRAWN.add(key)
                rows = s.data(data)
                if len(rows):
                    _check(it, "report", name, rows, s.chart(rows) if hasattr(s, "chart") else rows, data)
        page = {(n, source): rows for n in fresh for source, rows in item_rows(it, n, [data])}
        for name, source, _label, drawn in item_drawings(replace(it, sections=tuple(fresh)), [data], short):
            DRAWN.add(("page", drawing_key(it, name), space))
            _check(it, "page", name, page[(name, source)], drawn, data)


def test_fig7_is_drawn_from_a_paper_scale_space():
    """The layout check above is not vacuous: Fig. 7 has a paper-scale space to draw from."""
    assert any(it.item == "Fig. 7" and it.paper == "cianfarani-2022" for it, _ in CASES)
