"""Long chart titles are broken into lines at spaces."""

from analysis.charts.titles import wrap_title


def test_a_short_title_stays_one_string_and_a_long_one_becomes_lines_at_spaces():
    assert wrap_title("zoo:a -> zoo:b", 20) == "zoo:a -> zoo:b"
    lines = wrap_title("Stitching plots: a row per donor pair, every setting in one panel", 20)
    assert lines == ["Stitching plots: a", "row per donor pair,", "every setting in one", "panel"]
    assert wrap_title("a zoo:very-long-name-without-spaces b", 10) == ["a", "zoo:very-long-name-without-spaces", "b"]
