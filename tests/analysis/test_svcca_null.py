"""SVCCA's protocol in Cianfarani et al. 2022 B.1: with n images the mean canonical correlation of k kept
directions grows with k / n even for independent data, so each unit caps k (`svcca_max_k`), records the k
each side kept, and the report prints the null score (independent data at those k and n) beside SVCCA."""

import math

import numpy as np
import pandas as pd
import pytest

from analysis.charts.cka import measures_compared
from analysis.svcca_null import svcca_null
from sweep.config.errors import SpecError
from sweep.config.space import load_space, parse_space
from sweep.kinds.similarity.spec import SVCCA_MAX_RATIO
from tests.conftest import REPO
from tests.sweep.kinds.test_similarity import WITHIN, _space


def _abs_correlation_mean(n: int) -> float:
    """E|r| of two independent Gaussian samples of size n: r has the density (1 - r^2)^((n - 4) / 2) /
    B(1/2, (n - 2) / 2) on [-1, 1], so E|r| = 2 / ((n - 2) B(1/2, (n - 2) / 2))."""
    m = (n - 2) / 2
    beta = math.exp(math.lgamma(0.5) + math.lgamma(m) - math.lgamma(0.5 + m))
    return 2 / ((n - 2) * beta)


def test_the_null_of_one_direction_is_the_mean_absolute_correlation_of_independent_samples():
    """k_A = k_B = 1: SVCCA is |r| of two independent samples, whose mean is known in closed form; 4,000
    draws put the Monte Carlo mean within 4 standard errors (|r|'s sd is below 1 / sqrt(n - 1))."""
    n = 40
    got = svcca_null(n, 1, 1, draws=4000)
    assert got == pytest.approx(_abs_correlation_mean(n), abs=4 / math.sqrt((n - 1) * 4000))


def test_the_null_grows_with_k_over_n():
    """Independent Gaussians at n = 1,000 (the measurements: 0.19 at k = 50, 0.33 at 150), and the
    ratio, not k alone, sets it (k = 50 of 1,000 as k = 10 of 200, to the draws' spread)."""
    at = {k: svcca_null(1000, k, k) for k in (50, 150)}
    assert at[50] == pytest.approx(0.19, abs=0.01) and at[150] == pytest.approx(0.33, abs=0.01)
    assert svcca_null(200, 10, 10, draws=40) == pytest.approx(at[50], abs=0.02)
    with pytest.raises(ValueError, match="k_a, k_b < n"):
        svcca_null(100, 100, 5)


def test_the_shipped_protocol_keeps_k_over_n_at_most_a_tenth_and_its_null_below_a_quarter():
    """Every SVCCA unit of the shipped spaces: k <= svcca_max_k <= n / 10, and independent data at the largest
    k the unit can keep score below 0.25."""
    units = [
        u
        for path in sorted((REPO / "search_spaces").glob("cianfarani_*.yaml"))
        for u in load_space(path).units.get("similarity", ())
        if u.measure == "svcca"
    ]
    assert len(units) == 2  # B.1 on CIFAR-10 and Fashion-MNIST
    for u in units:
        assert u.svcca_max_k / u.images <= SVCCA_MAX_RATIO
        assert svcca_null(u.images, u.svcca_max_k, u.svcca_max_k) < 0.25


def test_the_cap_is_checked_and_applies_to_svcca_only():
    svcca = dict(WITHIN, measure="svcca", images=200)
    (unit,) = parse_space(_space([svcca])).units["similarity"]
    assert unit.svcca_max_k == 10 and "k <= 10" in unit.label  # images // 20
    assert parse_space(_space([dict(svcca, svcca_max_k=20)])).units["similarity"][0].svcca_max_k == 20
    with pytest.raises(SpecError, match=r"^similarity\[0\]\.svcca_max_k: expected an integer in \[1, 20\], found 21"):
        parse_space(_space([dict(svcca, svcca_max_k=21)]))
    with pytest.raises(SpecError, match=r"^similarity\[0\]\.svcca_max_k: expected null .*measure: svcca"):
        parse_space(_space([dict(WITHIN, svcca_max_k=5)]))
    cka = parse_space(_space([WITHIN])).units["similarity"][0]
    assert cka.svcca_max_k is None


def _rows(k: bool) -> pd.DataFrame:
    """One pair of points under CKA and SVCCA, as two units' rows (with or without the k columns)."""
    base = dict(status="done", a="zoo:a", b="zoo:b", a_inputs="benign", b_inputs="benign", images=1000)
    base.update(a_index=1, b_index=1, a_point="layer1", b_point="layer1", time_measure_s=0.5)
    cka = dict(base, measure="cka", cka=0.8, svcca=np.nan)
    svcca = dict(base, measure="svcca", cka=np.nan, svcca=0.6, time_measure_s=2.0)
    if k:
        svcca.update(svcca_k_a=50, svcca_k_b=40)
    return pd.DataFrame([cka, svcca])


def test_the_b1_table_prints_the_null_at_each_pairs_k_and_n_and_reads_parts_without_k():
    table = measures_compared(_rows(k=True))
    (row,) = table.itertuples()
    assert (row.svcca_k_a, row.svcca_k_b) == (50, 40) and row.svcca == pytest.approx(0.6)
    assert row.svcca_null == svcca_null(1000, 50, 40) and 0.15 < row.svcca_null < 0.2
    old = measures_compared(_rows(k=False))  # a part written before k was recorded
    assert len(old) == 1 and old["svcca_null"].isna().all() and old["svcca"].iloc[0] == pytest.approx(0.6)
