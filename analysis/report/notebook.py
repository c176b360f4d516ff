"""The report's figures and tables one at a time, for a notebook: `data = analysis.report_data(RESULTS)`, then
`analysis.figure(NAME, data)` (an Altair chart to restyle or save) and `analysis.table(NAME, data)` (a
DataFrame). NAME is the stem of the file the report writes (`stitching`, `cka_matrices`, `donors`, ...:
`analysis.figures()` and `analysis.tables()` list them); `data.where(objective="tlm")` narrows every table
to a setting first."""

from __future__ import annotations

import altair as alt
import pandas as pd

from analysis.reading import Plugins
from analysis.report.data import ReportData
from analysis.report.data import report_data as _report_data
from analysis.report.sections import chart_sections
from analysis.report.table_sections import table_sections


def figures() -> list[str]:
    """The names of the report's figures, in report order."""
    return [s.name for s in chart_sections()]


def tables() -> list[str]:
    """The names of the report's tables that have one (its CSV's stem), in report order."""
    return [s.name for s in table_sections() if s.name]


def report_data(results, plugins: Plugins = None) -> ReportData:
    """Every table of a results directory (a folder or a `pyarrow.fs` URI), prepared as the report uses them;
    the plugins the sweep kept imported first (`plugins`: others, or False for none, as `analysis.load` takes
    them), so that a plugin kind's figures and tables can be drawn."""
    return _report_data(results, plugins=plugins)[0]


def figure(name: str, data: ReportData) -> alt.TopLevelMixin:
    """The report's figure `name` drawn from `data`; a ValueError when `data` has nothing for it."""
    section = _find(name, chart_sections())
    rows = section.data(data)
    if not len(rows):
        raise ValueError(f"figure {name!r}: no rows in this data for it ({section.title})")
    return section.report_chart(rows)


def table(name: str, data: ReportData) -> pd.DataFrame:
    """The report's table `name` (empty when `data` has nothing for it)."""
    return _find(name, table_sections()).data(data)


def section(name: str):
    """The report's chart or table section named `name` (a ValueError naming the known ones)."""
    return _find(name, [*chart_sections(), *table_sections()])


def _find(name: str, sections: list):
    """The section of `sections` named `name`, looked up once by name (a ValueError naming the known ones)."""
    by_name: dict = {}
    for s in sections:
        if s.name:
            by_name.setdefault(s.name, s)  # a chart before a table of the same name, as the report orders them
    if name not in by_name:
        raise ValueError(f"unknown report section {name!r}; known: {list(by_name)}")
    return by_name[name]
