"""The report's sections are found by name: a notebook's `analysis.figure` / `analysis.table` and the report's
own always-shown tables read the sections' declarations, not their titles."""

import pytest

from analysis.report.notebook import figures, section, tables
from analysis.report.sections import chart_sections
from analysis.report.table_sections import table_sections

CHARTS, TABLES = chart_sections(), table_sections()


def test_each_section_has_one_name_the_file_it_writes():
    charts, named_tables = [s.name for s in CHARTS], [s.name for s in TABLES if s.name]
    assert len(set(charts)) == len(charts) and len(set(named_tables)) == len(named_tables)
    assert all(s.png == f"{s.name}.png" for s in CHARTS)
    assert all(s.csv == f"{s.name}.csv" for s in TABLES if s.csv)
    assert figures() == charts and tables() == named_tables


def test_the_donors_and_trials_tables_are_shown_even_when_empty_by_their_flag():
    assert {s.title for s in TABLES if s.always} == {"Donors", "Trials"}


def test_section_finds_a_chart_before_a_table_of_the_same_name_and_names_the_known_ones():
    from analysis.report.notebook import _find
    from analysis.report.sections import ChartSection
    from analysis.report.table_sections import TableSection

    chart = ChartSection("a chart", lambda d: d.done, lambda rows: None, "shared.png")
    table = TableSection("its rows", lambda d: d.done, csv="shared.csv")
    assert _find("shared", [chart, table]) is chart and _find("shared", [table]) is table
    assert section("donors") in TABLES and section("stitching") in CHARTS
    with pytest.raises(ValueError, match="unknown report section 'donor'.*'donors'"):
        section("donor")


def test_stitching_class_collapse_and_cross_task_are_left_out_without_same_layer_trials():
    from tests.analysis.report.test_write import report_of, study_trials

    names = ("stitching", "most_frequent_class", "cross_task")
    cross_layer = report_of(study_trials(same_layer=False))
    assert not [n for n in names if section(n).drawn(section(n).data(cross_layer))]
    both = report_of(study_trials())
    rows = section("stitching").data(both)
    assert section("stitching").drawn(rows) and set(rows["end"]) == {"zoo:b"}
    assert set(section("most_frequent_class").data(both)["end"]) == {"zoo:b"}
