"""Debiased linear CKA (Song et al. 2012's unbiased HSIC estimator in CKA, as Nguyen et al. 2021 and
Kornblith et al. use it): CKA with each HSIC the unbiased U-statistic on n x n linear Grams with zeroed
diagonals, so that it does not rise with the features per image at a fixed number of images. Its catalogue
entry, memory and work models (three n x n Grams), math and registration."""

from __future__ import annotations

from sweep.costs.work import Work, gram
from sweep.measures.indices.base import register_index
from sweep.store.catalogue import IndexEntry

ENTRY = IndexEntry(
    "cka_debiased",
    ("sim_cka_debiased",),
    "cka (debiased)",
    "similarity",
    description="debiased linear CKA: unbiased HSIC (Song et al. 2012)",
    scopes=("trial", "similarity"),
)


def numbers(rows: int, pa: int, pb: int) -> int:
    """A float64 copy of each side and three n x n matrices (the two Grams and a product's workspace)."""
    return rows * (pa + pb) + 3 * rows * rows


def count(rows: int, pa: int, pb: int) -> Work:
    """Two n x n Grams and the elementwise sums of the three HSICs."""
    return Work(calls=1) + gram(rows, pa) + gram(rows, pb) + Work(elem=9 * rows * rows)


def unbiased_hsic(k, l_) -> float:
    """Song et al. 2012's unbiased HSIC of two n x n Grams (their diagonals ignored), n >= 4."""
    n = k.shape[0]
    k, l_ = k.clone(), l_.clone()
    k.fill_diagonal_(0.0)
    l_.fill_diagonal_(0.0)
    ones_k, ones_l = k.sum(1), l_.sum(1)
    trace = (k * l_).sum()
    return (trace + ones_k.sum() * ones_l.sum() / ((n - 1) * (n - 2)) - 2.0 * (ones_k @ ones_l) / (n - 2)) / (
        n * (n - 3)
    )


def debiased_cka(a, b) -> float:
    """HSIC_u(K, L) / sqrt(HSIC_u(K, K) HSIC_u(L, L)) with K = A A^T, L = B B^T (float64)."""
    from sweep.measures.matrices import pair_f64

    a, b = pair_f64(a, b)
    n = a.shape[0]
    if n < 4:
        raise ValueError(f"the unbiased HSIC needs at least 4 images, found {n}")
    k, l_ = a @ a.T, b @ b.T
    kk, ll = unbiased_hsic(k, k), unbiased_hsic(l_, l_)
    if kk <= 0 or ll <= 0:
        raise ValueError("a representation is constant over the examples (zero HSIC)")
    return float(unbiased_hsic(k, l_) / (kk * ll).sqrt())


INDEX = register_index(ENTRY, debiased_cka, "flatten", numbers=numbers, count=count)
