"""The report's charts: each is a `ChartSection` (title, which rows of the report's data, how to draw them, the
files to write, where in the report it goes), declared by the kind of work whose table it draws
(`analysis/report/kinds/<kind>.py`: `sections()`, named by the kind's `Kind.report`). `chart_sections()`
gathers them in report order; the tables are `analysis.report.table_sections.table_sections()`.
`analysis.report.write` draws both."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import altair as alt
import pandas as pd

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
    # where the report draws it: every kind's sections by `order`, those without one last (registration order)
    order: float = math.inf
    # more PNGs the sweep's report writes from the same rows when it draws the section: file name -> chart
    pngs: Callable[[pd.DataFrame], dict[str, alt.TopLevelMixin]] | None = None

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


def in_order(sections: list) -> list:
    """`sections` by their `order` (stable: those of equal order as given)."""
    return sorted(sections, key=lambda s: s.order)


def kind_reports() -> list[tuple[object, ModuleType | None]]:
    """(what each registered kind of work declares as its report, its report module) in registration order:
    `Kind.report` is the kind's `sections` (or a list of them), or their "package.module:name"; named so, the
    module may also define `tables()`, the kind's table sections (`table_sections()`); None otherwise."""
    from sweep.registry import KINDS, resolve

    out = []
    for kind in KINDS.values():
        if kind.report is None:
            continue
        named = isinstance(kind.report, str)
        module = importlib.import_module(kind.report.partition(":")[0]) if named else None
        out.append((resolve(kind.report) if named else kind.report, module))
    return out


def chart_sections() -> list[ChartSection]:
    """The report's charts, in report order: those each registered kind of work declares for its table
    (`Kind.report`: its sections, or the "package.module:name" of them), ordered by `ChartSection.order`."""
    out = []
    for declared, _ in kind_reports():
        out += list(declared() if callable(declared) else declared)
    return in_order(out)
