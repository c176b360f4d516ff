"""The report's intervals over runs: a 95% bootstrap interval of the mean from 3 values on, min-max below."""

import numpy as np
import pytest

from analysis.intervals import BOOTSTRAP, MINMAX, interval


def test_fewer_than_three_values_give_their_range_and_say_so():
    assert interval([0.2, 0.5]) == (0.2, 0.5, MINMAX)
    assert interval([0.7]) == (0.7, 0.7, MINMAX)
    lo, hi, how = interval([])
    assert np.isnan(lo) and np.isnan(hi) and how == ""


def test_the_bootstrap_interval_has_the_width_the_normal_theory_predicts():
    """For 400 draws of N(0, 1), the 95% interval of the mean is about 2 x 1.96 / 20 = 0.196 wide and holds 0."""
    x = np.random.default_rng(1).normal(size=400)
    lo, hi, how = interval(x)
    assert how == BOOTSTRAP and lo < x.mean() < hi
    assert hi - lo == pytest.approx(2 * 1.96 * x.std(ddof=1) / 20, rel=0.15)
    assert interval(x) == (lo, hi, how)  # reproducible: a fixed seed
    assert interval([3.0, 3.0, 3.0, float("nan")]) == (3.0, 3.0, BOOTSTRAP)  # NaNs dropped; no spread, no width
