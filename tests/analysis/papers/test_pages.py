"""What the docs' paper pages show: the paper's numbers as the paper printed them, ours rounded to the decimals
the paper printed, the places where a paper contradicts itself flagged instead of compared, and captions that
say more than our copy of the paper marked as our reading."""

import pytest

from analysis.papers import PAPERS, RegistryError, _number, items
from analysis.papers.pages import render


def _rows(slug: str, item: str, measured: dict | None = None) -> list[str]:
    page = render(slug, measured or {})
    section = page.split(f"### {item}\n", 1)[1].split("\n### ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| row |")]


def _row(slug: str, item: str, row: str, col: str, measured: dict | None = None) -> list[str]:
    """The cells of the numbers-table row (row, col) of `item` on the page of `slug`."""
    for line in _rows(slug, item, measured):
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if cells[:2] == [row, col]:
            return cells
    raise AssertionError(f"no row {row!r} / {col!r} in {slug} {item}")


def test_the_pages_print_the_papers_numbers_as_printed():
    # the cells the earlier pages rounded (99.97% as 100.0%) or cut (0.80 as 0.8, 1.000 as 1)
    assert _row("balogh-jelasity-2023", "Table 1", "h_N3", "Accuracy")[2] == "99.97%"
    assert _row("balogh-jelasity-2023", "Table 1", "g_N1", "Accuracy")[2] == "95.36%"
    assert _row("balogh-jelasity-2023", "Table 1", "g_N2", "Accuracy")[2] == "95.35%"
    assert _row("balogh-jelasity-2023", "Table 1", "h_R1", "Rob. Acc.")[2] == "94.10%"
    assert _row("jones-2022", "Fig. 4", "robust models (eps 3), inverted data (mean)", "CKA")[2] == "0.80"
    assert _row("smith-marcu-2024", "Table C1", "Colour", "Base Accuracy")[2] == "1.000"
    assert _row("balogh-jelasity-2025", "Table 2", "CIFAR-10 / ViT", "LCKA / ρ")[2] == "0.6320"
    # every number of every page: the paper's cell starts with the printed digits and the unit
    for slug in PAPERS:
        for it in items(slug):
            for n in it.numbers:
                assert _row(slug, it.item, n.row, n.col)[2].startswith(f"{n.printed}{n.unit}"), (slug, it.item, n)


def test_ours_is_rounded_to_the_decimals_the_paper_printed():
    table = next(it for it in items("balogh-jelasity-2023") if it.item == "Table 1")
    values = [99.9649 if (n.row, n.col) == ("h_N3", "Accuracy") else 3.2 for n in table.numbers]
    measured = {"ours": {"balogh-jelasity-2023 Table 1": {"source": "r", "values": values}}}
    assert _row("balogh-jelasity-2023", "Table 1", "h_N3", "Accuracy", measured)[3] == "99.96%"
    assert _row("balogh-jelasity-2023", "Table 1", "h_N3", "Rob. Acc.", measured)[3] == "3%"  # printed: 0%
    c1 = next(it for it in items("smith-marcu-2024") if it.item == "Table C1")
    measured = {"ours": {"smith-marcu-2024 Table C1": {"source": "r", "values": [0.98765] * len(c1.numbers)}}}
    assert _row("smith-marcu-2024", "Table C1", "Correlated", "Base Accuracy", measured)[3] == "0.988"


@pytest.mark.parametrize(
    "slug, item, says",
    [
        ("balogh-jelasity-2023", "Table 1", "64.31% in Table 1 and 67.28% in Table 2"),
        ("balogh-jelasity-2023", "Table 2", "64.31% in Table 1 and 67.28% in Table 2"),
        ("smith-marcu-2024", "Table C1", "0.995 in the 'Digit' is Receiver column and 0.996"),
        ("balogh-jelasity-2023", "Fig. 26", "Fashion-MNIST network h_N3"),
        ("balogh-jelasity-2023", "Fig. 9", "Appendix C says the added rows 6-9"),
        ("balogh-jelasity-2023", "Fig. 27", "Appendix C says the added rows 6-9"),
    ],
)
def test_the_papers_self_contradictions_are_flagged_on_their_pages(slug, item, says):
    page = render(slug, {})
    section = page.split(f"### {item}\n", 1)[1].split("\n### ", 1)[0]
    assert "**The paper contradicts itself**" in section and says in section


@pytest.mark.parametrize(
    "slug, item, row, col",
    [
        ("balogh-jelasity-2023", "Table 1", "f_R6", "Rob. Acc."),
        ("balogh-jelasity-2023", "Table 2", "WideResNet-28-10 (Gowal et al., 2021)", 'AutoAttack ("rand")'),
        ("smith-marcu-2024", "Table C1", "Digit", "Acc. with stitch at Layer 1 / 'Digit' is Receiver"),
        ("smith-marcu-2024", "Table C1", "Digit", "Acc. with stitch at Layer 1 / 'Digit' is Sender"),
    ],
)
def test_a_number_the_paper_prints_twice_is_not_compared_with_ours(slug, item, row, col):
    it = next(i for i in items(slug) if i.item == item)
    measured = {"ours": {f"{slug} {item}": {"source": "r", "values": [0.5] * len(it.numbers)}}}
    cells = _row(slug, item, row, col, measured)
    assert "the paper contradicts itself" in cells[2] and "not compared" in cells[3]


@pytest.mark.parametrize(
    "slug, item, says",
    [
        ("cianfarani-2022", "Fig. 8", "four additional threat models"),
        ("smith-marcu-2024", "Fig. 1a", "Colour-only is first introduced in Section 4.1"),
        ("smith-marcu-2024", "B.2", "for each of the image-based datasets described"),
        ("jones-2022", "Fig. 1", "eps x eps matrix"),
    ],
)
def test_captions_our_copy_does_not_support_are_marked_as_our_reading(slug, item, says):
    page = render(slug, {})
    section = page.split(f"### {item}\n", 1)[1].split("\n### ", 1)[0]
    assert "Our reading: " in section and says in section


def test_a_printed_form_that_does_not_spell_the_value_is_refused():
    doc = {"row": "h_N3", "col": "Accuracy", "value": 99.97, "unit": "%"}
    assert _number(doc, "x").printed == "99.97" and _number(dict(doc, value=0), "x").printed == "0"
    assert _number(dict(doc, printed="99.970"), "x").decimals == 3
    assert _number(dict(doc, printed="one-third"), "x").decimals is None
    with pytest.raises(RegistryError, match="field 'printed' must spell the value 99.97, found '99.9'"):
        _number(dict(doc, printed="99.9"), "x")
