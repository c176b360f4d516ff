"""Mutual k-nearest-neighbour overlap (as in ReSi, Klabunde et al. 2023): the mean over images of the Jaccard
overlap of the image's k nearest neighbours (Euclidean, itself excluded) in the two representations; k = 10
(`K`) unless the option `mknn_k` sets it (a similarity entry's, or a stitching block's), capped at n - 1. Its
catalogue entry, memory and work models (two n x n distance matrices), math and
registration."""

from __future__ import annotations

from sweep.costs.work import Work
from sweep.measures.indices.base import register_index
from sweep.store.catalogue import IndexEntry

K = 10  # neighbours per image

ENTRY = IndexEntry(
    "mknn",
    ("sim_mknn",),
    "mutual k-nn",
    "similarity",
    description=f"mutual k-NN: mean Jaccard overlap of the k nearest neighbours, k = {K} or mknn_k (ReSi)",
    scopes=("trial", "similarity"),
)


def numbers(rows: int, pa: int, pb: int) -> int:
    """A float64 copy of each side, an n x n distance matrix per side, and the n x k neighbour masks."""
    return rows * (pa + pb) + 4 * rows * rows


def count(rows: int, pa: int, pb: int) -> Work:
    """Each side's n x n Gram (its distances), a top-k per row, the overlaps."""
    return Work(calls=1, mac=rows * rows * (pa + pb), elem=8 * rows * rows)


def _neighbours(a, k: int):
    """Each row's k nearest other rows (Euclidean), as an n x n boolean mask."""
    import torch

    d = torch.cdist(a, a)
    d.fill_diagonal_(float("inf"))
    idx = d.topk(k, dim=1, largest=False).indices
    return torch.zeros_like(d, dtype=torch.bool).scatter_(1, idx, True)


def mutual_knn(a, b, k: int = K) -> float:
    """Mean over images of |N_a(x) & N_b(x)| / |N_a(x) | N_b(x)|, k neighbours each (capped at n - 1)."""
    from sweep.measures.matrices import pair_f64

    a, b = pair_f64(a, b)
    n = a.shape[0]
    if n < 2:
        raise ValueError(f"mutual k-NN needs at least 2 images, found {n}")
    k = min(k, n - 1)
    na, nb = _neighbours(a, k), _neighbours(b, k)
    inter = (na & nb).sum(1).double()
    return float((inter / (2 * k - inter)).mean())


# k: the option `mknn_k` (similarity entries and stitching blocks), K when unset
INDEX = register_index(ENTRY, mutual_knn, "flatten", numbers=numbers, count=count, options={"mknn_k": "k"})
