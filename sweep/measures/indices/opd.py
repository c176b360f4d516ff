"""The orthogonal Procrustes distance (Balogh & Jelasity 2025 Eq. 7-8; Ding et al. 2021): its catalogue entry,
its memory and work models, its math and its registration."""

from __future__ import annotations

from sweep.costs.memory import ROW_CHUNK, grams_or_copies
from sweep.costs.work import Work, covariances, gram, mp2
from sweep.measures.indices.base import register_index
from sweep.store.catalogue import IndexEntry

ENTRY = IndexEntry(
    "opd",
    ("sim_opd",),
    "opd",
    "distance",
    reptest_column="d_opd",
    reptest_label="opd",
    description="orthogonal Procrustes distance (Ding et al. 2021)",
    scopes=("trial", "reptest", "similarity"),
)


def numbers(rows: int, pa: int, pb: int) -> int:
    """The orthogonal Procrustes distance: as CKA, with 7 n x n matrices (its eigendecompositions), 3 copies."""
    return grams_or_copies(rows, pa, pb, 7, 3)


def count(rows: int, pa: int, pb: int) -> Work:
    """OPD: wide, each side's Gram and its eigendecomposition, the n x n cross product, its singular values."""
    one = Work(calls=1)
    if rows < max(pa, pb):
        grams = gram(rows, pa) + gram(rows, pb)
        return one + grams + Work(decomp=2 * rows**3, mac=rows**3, values=rows**3, elem=4 * rows * rows)
    if rows > ROW_CHUNK:
        return one + covariances(rows, pa, pb) + Work(values=mp2(pa, pb))
    return one + Work(elem=6 * rows * (pa + pb), mac=rows * pa * pb, values=mp2(pa, pb))


def opd(a, b) -> float:
    """Orthogonal Procrustes distance (Balogh & Jelasity 2025 Eq. 8) after centring and Frobenius normalisation:
    ||A||^2 + ||B||^2 - 2 ||B^T A||_* = 2 - 2 ||B^T A||_*, in [0, 2]. A with fewer columns is zero-padded
    implicitly (the nuclear norm does not change)."""
    import torch

    from sweep.measures import matrices
    from sweep.measures.matrices import centre, covariances, pair_2d, pair_f64, unit

    a, b = pair_2d(a, b)
    if a.shape[0] < max(a.shape[1], b.shape[1]):  # more neurons than examples: work in the n-dim row space
        xa, xb = _row_factor(a), _row_factor(b).to(a.device)
        nuclear = torch.linalg.svdvals(xb.T @ xa).sum()  # = ||B^T A||_* (orthogonal factors drop)
    elif a.shape[0] > matrices.ROWS:  # tall (per-position rows): B^T A is the cross-covariance, over chunks of rows
        saa, sbb, sab = covariances(a, b)
        if torch.trace(saa) == 0 or torch.trace(sbb) == 0:
            raise ValueError("a representation is constant over the examples (zero after centring)")
        nuclear = torch.linalg.svdvals(sab).sum() / (torch.trace(saa) * torch.trace(sbb)).sqrt()
    else:
        a, b = pair_f64(a, b)
        a, b = unit(centre(a)), unit(centre(b))
        nuclear = torch.linalg.svdvals(b.T @ a).sum()
    return float(max(0.0, 2.0 - 2.0 * nuclear))


def _row_factor(a):
    """U S (n x n) of the centred, Frobenius-normalised A = U S V^T, from its n x n Gram (U S^2 U^T, by eigh):
    what OPD needs of a wide A, without A's float64 copy or V (n x p). The Gram squares A's condition:
    singular values below about 1e-8 of the largest come out as rounding noise of that size, under the
    float32 rounding (6e-8) of the activations they came from."""
    import torch

    from sweep.measures.matrices import centred_gram

    k = centred_gram(a)
    total = torch.trace(k)
    if total == 0:
        raise ValueError("a representation is constant over the examples (zero after centring)")
    w, u = torch.linalg.eigh(k / total)
    del k
    return u * w.clamp(min=0.0).sqrt()


INDEX = register_index(ENTRY, opd, "flatten", numbers=numbers, count=count)  # Eq. 8
