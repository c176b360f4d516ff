"""Representational similarity analysis (Kriegeskorte et al. 2008): the Spearman correlation of the two
representational dissimilarity matrices' upper triangles, the dissimilarity of two images 1 - the Pearson
correlation of their representations (the common default). Its catalogue entry, memory and work models
(two n x n RDMs and the ranks of their upper triangles), math and registration."""

from __future__ import annotations

from sweep.costs.work import Work
from sweep.measures.indices.base import register_index
from sweep.store.catalogue import IndexEntry

ENTRY = IndexEntry(
    "rsa",
    ("sim_rsa",),
    "rsa",
    "similarity",
    description="RSA: Spearman correlation of the 1 - Pearson RDMs (Kriegeskorte et al. 2008)",
    scopes=("trial", "similarity"),
)


def numbers(rows: int, pa: int, pb: int) -> int:
    """A float64 copy of each side, two n x n RDMs, their upper triangles and ranks (3 n x n in all)."""
    return rows * (pa + pb) + 5 * rows * rows


def count(rows: int, pa: int, pb: int) -> Work:
    """Each side's n x n Gram, then sorting the two upper triangles (counted as elementwise passes)."""
    return Work(calls=1, mac=rows * rows * (pa + pb), elem=10 * rows * rows)


def rdm(a):
    """1 - the Pearson correlation between the rows of `a` (images x features), float64."""
    from sweep.measures.matrices import as_2d, as_f64

    a = as_f64(as_2d(a, "A"), "A")
    a = a - a.mean(dim=1, keepdim=True)
    norms = a.norm(dim=1, keepdim=True)
    if (norms == 0).any():
        raise ValueError("an image's representation is constant over its features (no correlation)")
    a = a / norms
    return 1.0 - a @ a.T


def _ranks(v):
    """Average ranks (ties share their mean rank), as Spearman's correlation takes them."""
    import torch

    _, inverse, counts = torch.unique(v, sorted=True, return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).double()
    return (ends - (counts.double() - 1) / 2)[inverse]


def rsa(a, b) -> float:
    """Spearman correlation of the upper triangles (off the diagonal) of the two RDMs."""
    import torch

    from sweep.measures.matrices import pair_2d

    a, b = pair_2d(a, b)
    n = a.shape[0]
    if n < 3:
        raise ValueError(f"RSA needs at least 3 images, found {n}")
    iu = torch.triu_indices(n, n, 1, device=a.device)
    ra, rb = (_ranks(m[iu[0], iu[1]]) for m in (rdm(a), rdm(b).to(a.device)))
    ra, rb = ra - ra.mean(), rb - rb.mean()
    den = ra.norm() * rb.norm()
    if den == 0:
        raise ValueError("an RDM is constant (every pair equally dissimilar)")
    return float(ra @ rb / den)


INDEX = register_index(ENTRY, rsa, "flatten", numbers=numbers, count=count)
