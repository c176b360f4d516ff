"""The report's tables: each is a `TableSection` (title, which rows of the report's data, an introduction, the
columns shown, the files to write, where in the report it goes), declared by the kind of work whose table it
shows (`analysis/report/kinds/<kind>.py`: `tables()`) or, for one of no kind, in `TABLES` here.
`table_sections()` gathers them in report order; `analysis.report.write` draws them after the charts."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from analysis.report.sections import in_order, kind_reports

if TYPE_CHECKING:
    from analysis.report.data import ReportData


@dataclass(frozen=True)
class TableSection:
    """A table of the report: shown when `data` has rows, saved as `csv` (and `md`)."""

    title: str
    data: Callable[[ReportData], pd.DataFrame]
    intro: str | Callable[[pd.DataFrame], str] = ""  # HTML; a function of the rows where it depends on them
    columns: list[str] | None = None  # None: every column
    csv: str | None = None
    md: str | None = None
    always: bool = False  # shown, and its CSV written, even without rows (the donors, the trials)
    # the sweep's report shows it only when this holds of its rows (`sections.varies`); a paper's page always
    shown: Callable[[pd.DataFrame], bool] | None = None
    # where the report shows it: every table by `order`, those without one last (as their kinds are registered)
    order: float = math.inf
    page: bool = True  # shown on the page; False: its CSV only (written when it has rows)

    @property
    def name(self) -> str | None:
        """What a notebook asks for it by (`analysis.table`): its CSV's stem; None when it writes no CSV."""
        return self.csv.rsplit(".", 1)[0] if self.csv else None

    def intro_for(self, rows: pd.DataFrame) -> str:
        """The introduction shown above `rows` (HTML; empty for none)."""
        return self.intro(rows) if callable(self.intro) else self.intro


TABLES = [
    TableSection(
        "Unreadable results parts",
        lambda d: d.problems,
        "Skipped: these files could not be read as results (rerun <code>stitchsweep resume</code> to"
        " recompute their trials).",
        ["path", "kind", "error"],
        csv="problems.csv",
        order=80,
    ),
]


def table_sections() -> list[TableSection]:
    """The report's tables, in report order: `TABLES` and those each registered kind of work declares (the
    `tables()` of the module of its `Kind.report`), ordered by `TableSection.order`."""
    out = list(TABLES)
    for _, module in kind_reports():
        declared = getattr(module, "tables", None)
        if callable(declared) and getattr(declared, "__module__", None) == module.__name__:  # its own, not imported
            out += list(declared())
    return in_order(out)
