"""Linear CKA (Balogh & Jelasity 2025 Eq. 4; Kornblith et al. 2019): its catalogue entry, its memory and work
models, its math and its registration. The similarity kind computes it by its own streamed or minibatch
estimators (`similarity_by="cka"`, `sweep.measures.similarity`)."""

from __future__ import annotations

from sweep.costs.memory import grams_or_copies
from sweep.costs.work import Work, covariances, gram
from sweep.measures.indices.base import register_index
from sweep.store.catalogue import IndexEntry

ENTRY = IndexEntry(
    "cka",
    ("sim_cka",),
    "cka",
    "similarity",
    reptest_column="d_cka",
    reptest_label="cka",
    description="linear CKA (Kornblith et al. 2019)",
    scopes=("trial", "reptest", "similarity"),
)


def numbers(rows: int, pa: int, pb: int) -> int:
    """Linear CKA: 3 n x n Grams (wide), covariances (tall), else 2 copies of each side."""
    return grams_or_copies(rows, pa, pb, 3, 2)


def count(rows: int, pa: int, pb: int) -> Work:
    """Linear CKA: two n x n Grams and their elementwise sums (wide), else the feature-space form's products."""
    if rows < max(pa, pb):
        return Work(calls=1) + gram(rows, pa) + gram(rows, pb) + Work(elem=3 * rows * rows)
    return Work(calls=1) + covariances(rows, pa, pb)  # the same three products


def linear_cka(a, b) -> float:
    """Linear CKA (Balogh & Jelasity 2025 Eq. 4) of column-centred A and B: ||B^T A||_F^2 / (||A^T A||_F ||B^T B||_F).

    Computed in float64 as sums of squares. The feature-space form (p x p products) is used when it is the
    smaller one; with more neurons than examples the equal Gram form (n x n), accumulated over chunks of
    features (memory: the input plus two n x n float64 Grams); with more than `ROWS` rows (per-position rows)
    the p x p covariances, accumulated over chunks of rows.
    """
    from sweep.measures import matrices
    from sweep.measures.matrices import centre, centred_gram, covariances, pair_2d, pair_f64

    a, b = pair_2d(a, b)
    n, pa, pb = a.shape[0], a.shape[1], b.shape[1]
    if n < max(pa, pb):  # tr(KL) with K = AA^T, L = BB^T: the same number, smaller matrices
        k = centred_gram(a)  # accumulated over chunks of features: A is never copied to float64 whole
        l_ = centred_gram(b).to(k.device)
        num, da, db = (k * l_).sum(), (k * k).sum().sqrt(), (l_ * l_).sum().sqrt()
    elif n > matrices.ROWS:  # tall (per-position rows): the same sums from covariances over chunks of rows
        saa, sbb, sab = covariances(a, b)
        num, da, db = (sab**2).sum(), (saa**2).sum().sqrt(), (sbb**2).sum().sqrt()
    else:
        a, b = pair_f64(a, b)
        a, b = centre(a), centre(b)
        num = ((b.T @ a) ** 2).sum()
        da, db = ((a.T @ a) ** 2).sum().sqrt(), ((b.T @ b) ** 2).sum().sqrt()
    if da == 0 or db == 0:
        raise ValueError("a representation is constant over the examples (zero after centring)")
    return float(num / (da * db))


INDEX = register_index(ENTRY, linear_cka, "flatten", similarity_by="cka", numbers=numbers, count=count)  # Eq. 4
