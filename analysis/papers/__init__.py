"""The papers' items: every figure, table and algorithm of the five papers stitchsweep reproduces, one entry each.

An entry says what the item shows (a caption in our words), whether the engine makes it (`status`), which
shipped search spaces produce it, which report sections draw it, which departures from the paper apply, where a
reduced run of it is documented, whether it has run at the paper's scale, and the paper's own numbers where its
text gives them (each with, where one exists, the report rows that hold ours). One JSON file per paper in this
folder holds its items in the paper's order; `stitchsweep figures` lists them, `stitchsweep report --paper`
draws them and the docs' pages (docs/papers/) are generated from them.

Reading the registry imports neither pandas, Altair, torch nor Ray.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path

HERE = Path(__file__).parent
STATUSES = ("runs", "missing", "schematic", "not reproducible", "not in the seed text")
KINDS = ("figure", "table", "algorithm")


@dataclass(frozen=True)
class Paper:
    slug: str  # what `--paper` takes
    short: str  # how the docs cite it: "Jones et al. 2022"
    citation: str  # authors, title, venue, year


PAPERS = {
    p.slug: p
    for p in (
        Paper(
            "balogh-jelasity-2023",
            "Balogh & Jelasity 2023",
            "András Balogh and Márk Jelasity, On the Functional Similarity of Robust and Non-Robust Neural"
            " Representations, ICML 2023",
        ),
        Paper(
            "jones-2022",
            "Jones et al. 2022",
            "Haydn T. Jones, Jacob M. Springer, Garrett T. Kenyon and Juston S. Moore, If You've Trained One"
            " You've Trained Them All: Inter-Architecture Similarity Increases With Robustness, UAI 2022",
        ),
        Paper(
            "cianfarani-2022",
            "Cianfarani et al. 2022",
            "Christian Cianfarani, Arjun Nitin Bhagoji, Vikash Sehwag, Ben Zhao, Haitao Zheng and Prateek"
            " Mittal, Understanding Robust Learning through the Lens of Representation Similarities, NeurIPS 2022",
        ),
        Paper(
            "smith-marcu-2024",
            "Smith & Marcu 2024",
            "Damian Smith and Antonia Marcu, Comparing Apples and Oranges: is Stitching Similarity a Load of"
            " Spheres?, NeurIPS 2024 workshop",
        ),
        Paper(
            "balogh-jelasity-2025",
            "Balogh & Jelasity 2025",
            "András Balogh and Márk Jelasity, How Not to Stitch Representations to Measure Similarity: Task Loss"
            " Matching Versus Direct Matching, AAAI 2025",
        ),
    )
}


@dataclass(frozen=True)
class Ours:
    """Where the report holds our value of a paper's number: the mean of `column` over the rows of report
        section `section` (a figure's or table's name, as `analysis.figures()` / `analysis.tables()`) whose columns
        equal `where`, times `scale` (100 turns a share into the paper's percent); only in the results of the sweeps
    named in `sweeps` when it names any (a table's column for one architecture, made by that architecture's space)."""

    section: str
    column: str
    where: dict = field(default_factory=dict)
    combine: bool = False  # several results folders make one drawing (the columns of one figure)
    scale: float = 1.0
    sweeps: tuple[str, ...] = ()


@dataclass(frozen=True)
class Number:
    """One number the paper's text gives for an item: a table cell (`row`, `col` as the paper labels them) or
    a value its prose states."""

    row: str
    col: str
    value: float
    unit: str = ""
    ours: Ours | None = None
    # the number as the paper prints it ("99.97", "0.80", "one-third"): the registry's JSON holds floats, which
    # drop trailing zeros; given where they differ from the value's shortest form
    printed: str = ""
    # where the paper prints another value for the same quantity (the other place and its value): the page
    # then flags the number instead of comparing ours with it
    contradiction: str = ""

    @property
    def decimals(self) -> int | None:
        """The decimals the paper printed (None when it printed words, e.g. "one-third")."""
        digits = self.printed.replace(".", "", 1)
        return (len(self.printed.partition(".")[2]) if "." in self.printed else 0) if digits.isdigit() else None


@dataclass(frozen=True)
class Item:
    paper: str
    item: str  # "Fig. 2", "Table C1", "Algorithm 1"
    kind: str
    caption: str
    status: str
    reason: str = ""  # why, for every status but `runs`
    spaces: tuple[str, ...] = ()  # under search_spaces/, the paper-scale space first
    sections: tuple[str, ...] = ()  # report sections that draw it
    departures: tuple[str, ...] = ()  # first cells of rows of the departures table (docs/design.md)
    reduced_run: str = ""  # the heading of docs/reproductions.md that documents a reduced run
    paper_scale: bool = False  # whether it has run at the paper's scale
    numbers: tuple[Number, ...] = ()
    layout: str = ""  # where the report's drawing differs from the paper's layout
    # what the caption says that our copy of the paper does not state (an inference of ours)
    reading: str = ""
    # where the paper contradicts itself about this item (captions against the text, one cell printed twice)
    contradictions: tuple[str, ...] = ()
    # the rows of its sections that draw it (column -> value), where a section draws several items (the
    # examples chart's panels: {"name": "fig_1a"})
    where: dict = field(default_factory=dict)
    combine: bool = False  # several results folders make one drawing (the columns of one figure)

    def as_json(self) -> dict:
        doc = asdict(self)
        doc["space"] = list(self.spaces)
        doc["section"] = list(self.sections)
        doc["paper_name"] = PAPERS[self.paper].short
        return doc


class RegistryError(ValueError):
    """An entry of a paper's JSON file is malformed (names the file, the item and the field)."""


def _ours(doc: dict) -> Ours:
    return Ours(**{k: tuple(v) if isinstance(v, list) else v for k, v in doc.items()})


def _number(doc: dict, where: str) -> Number:
    ours = doc.get("ours")
    try:
        value = doc["value"]
        printed = str(doc.get("printed") or (value if isinstance(value, int) else repr(float(value))))
        number = Number(
            str(doc["row"]),
            str(doc["col"]),
            float(value),
            doc.get("unit", ""),
            _ours(ours) if ours else None,
            printed,
            str(doc.get("contradiction", "")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise RegistryError(
            f"{where}: a number needs row, col, value (and optional unit, ours, printed, contradiction): {exc}"
        ) from None
    if number.decimals is not None and abs(float(printed) - number.value) > 1e-9 * max(1.0, abs(number.value)):
        raise RegistryError(f"{where}: field 'printed' must spell the value {number.value!r}, found {printed!r}")
    return number


def _item(paper: str, doc: dict, where: str) -> Item:
    known = {f for f in Item.__dataclass_fields__} - {"paper"}
    unknown = set(doc) - known
    if unknown:
        raise RegistryError(f"{where}: unknown field(s) {sorted(unknown)}; expected some of {sorted(known)}")
    for name, allowed in (("status", STATUSES), ("kind", KINDS)):
        if doc.get(name) not in allowed:
            raise RegistryError(f"{where}: field {name!r} must be one of {list(allowed)}, found {doc.get(name)!r}")
    if doc["status"] != "runs" and not doc.get("reason"):
        raise RegistryError(f"{where}: field 'reason' is required when the status is {doc['status']!r}")
    if doc["status"] == "runs" and not (doc.get("spaces") and doc.get("sections")):
        raise RegistryError(f"{where}: an item that runs names its spaces and its report sections")
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in doc.items() if k != "numbers"}
    numbers = tuple(_number(n, f"{where}, number {i}") for i, n in enumerate(doc.get("numbers", [])))
    return Item(paper=paper, numbers=numbers, **fields)


@cache
def _load(paper: str) -> tuple[Item, ...]:
    path = HERE / f"{paper}.json"
    docs = json.loads(path.read_text())
    out = tuple(_item(paper, d, f"{path.name}, item {d.get('item', i)!r}") for i, d in enumerate(docs))
    seen = [i.item for i in out]
    if len(seen) != len(set(seen)):
        raise RegistryError(f"{path.name}: an item is listed twice: {sorted(x for x in seen if seen.count(x) > 1)}")
    return out


def paper(name: str) -> Paper:
    """The paper a `--paper` argument names (its slug, e.g. `jones-2022`)."""
    if name not in PAPERS:
        raise KeyError(f"unknown paper {name!r}; known: {', '.join(PAPERS)}")
    return PAPERS[name]


def items(name: str | None = None) -> list[Item]:
    """Every registered item of paper `name` (all papers when None), in the papers' order."""
    names = [paper(name).slug] if name else list(PAPERS)
    return [it for n in names for it in _load(n)]
