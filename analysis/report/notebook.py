"""The report's figures and tables one at a time, for a notebook: `data = analysis.report_data(RESULTS)`, then
`analysis.figure(NAME, data)` (an Altair chart to restyle or save) and `analysis.table(NAME, data)` (a
DataFrame). NAME is the stem of the file the report writes (`stitching`, `cka_matrices`, `donors`, ...:
`analysis.figures()` and `analysis.tables()` list them); `data.where(objective="tlm")` narrows every table
to a setting first."""

from __future__ import annotations

import altair as alt
import pandas as pd

from analysis.report.write import CHARTS, TABLES, ReportData
from analysis.report.write import report_data as _report_data


def _stem(filename: str | None) -> str | None:
    return filename.rsplit(".", 1)[0] if filename else None


def figures() -> list[str]:
    """The names of the report's figures, in report order."""
    return [_stem(s.png) for s in CHARTS]


def tables() -> list[str]:
    """The names of the report's tables that have one (its CSV's stem), in report order."""
    return [_stem(s.csv) for s in TABLES if s.csv]


def report_data(results) -> ReportData:
    """Every table of a results directory (a folder or a `pyarrow.fs` URI), prepared as the report uses them."""
    return _report_data(results)[0]


def figure(name: str, data: ReportData) -> alt.TopLevelMixin:
    """The report's figure `name` drawn from `data`; a ValueError when `data` has nothing for it."""
    section = _find(name, CHARTS, "png", figures())
    rows = section.data(data)
    if not len(rows):
        raise ValueError(f"figure {name!r}: no rows in this data for it ({section.title})")
    return section.chart(rows)


def table(name: str, data: ReportData) -> pd.DataFrame:
    """The report's table `name` (empty when `data` has nothing for it)."""
    return _find(name, TABLES, "csv", tables()).data(data)


def section(name: str):
    """The report's chart or table section whose file stem is `name` (a ValueError naming the known ones)."""
    for sections, attr in ((CHARTS, "png"), (TABLES, "csv")):
        for s in sections:
            if _stem(getattr(s, attr)) == name:
                return s
    raise ValueError(f"unknown report section {name!r}; known: {figures() + tables()}")


def _find(name: str, sections, attr: str, names: list[str]):
    for s in sections:
        if _stem(getattr(s, attr)) == name:
            return s
    raise ValueError(f"unknown report section {name!r}; known: {names}")
