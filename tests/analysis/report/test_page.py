"""The report page's introduction says what its charts draw, and no more."""

from analysis.report.page import page
from tests.analysis.report.test_write import report_of, study_trials


def _intro(data) -> str:
    html = page(data, [], [])
    return html[html.index("<h1>") : html.index("No finished trials")]


def test_the_introduction_names_robust_accuracy_only_where_some_trial_measured_one():
    plain = _intro(report_of(study_trials()))
    assert "Stitching plots" in plain and "robust" not in plain and "Class collapse" in plain
    robust = _intro(report_of(study_trials(robust=True)))
    assert "robust accuracy" in robust


def test_the_introduction_names_no_stitching_plot_or_class_collapse_of_cross_layer_only_trials():
    intro = _intro(report_of(study_trials(same_layer=False)))
    assert "Stitching plots" not in intro and "Class collapse" not in intro
