"""Linear-regression R^2 (Kornblith et al. 2019, 2.1): the fraction of the target's variance that the
least-squares affine map from the sender explains, 1 - ||B - A W - c||^2 / ||B - mean B||^2. Asymmetric
(sender -> target); 1 whenever the sender has at least as many independent features as images. Its catalogue
entry, memory and work models (the sender's thin SVD), math and registration."""

from __future__ import annotations

from sweep.costs.work import Work
from sweep.measures.indices.base import register_index
from sweep.store.catalogue import IndexEntry

ENTRY = IndexEntry(
    "linreg",
    ("sim_linreg",),
    "linreg R^2",
    "similarity",
    description="R^2 of the least-squares linear map sender -> target (Kornblith et al. 2019)",
    scopes=("trial", "similarity"),
)


def numbers(rows: int, pa: int, pb: int) -> int:
    """Float64 copies of both sides, the sender's thin SVD (U: n x r, r = min(n, pa)) and U^T B."""
    r = min(rows, pa)
    return 2 * rows * (pa + pb) + rows * r + r * pb + r * r


def count(rows: int, pa: int, pb: int) -> Work:
    """The sender's thin SVD and the projection of the target on its column space."""
    r = min(rows, pa)
    return Work(calls=1, decomp=rows * pa * r, mac=rows * r * pb, elem=2 * rows * (pa + pb))


def linreg_r2(a, b) -> float:
    """R^2 of B (target) regressed on A (sender) with an intercept: ||P B||^2 / ||B||^2 after centring, P the
    projection on the column space of A (its singular vectors above float64 rounding of the largest)."""
    import torch

    from sweep.measures.matrices import centre, pair_f64

    a, b = pair_f64(a, b)
    a, b = centre(a), centre(b)
    total = (b * b).sum()
    if total == 0:
        raise ValueError("the target representation is constant over the examples (zero after centring)")
    u, s, _ = torch.linalg.svd(a, full_matrices=False)
    if not len(s) or s[0] == 0:
        return 0.0
    u = u[:, s > s[0] * max(a.shape) * torch.finfo(torch.float64).eps]
    return float(((u.T @ b) ** 2).sum() / total)


INDEX = register_index(ENTRY, linreg_r2, "flatten", numbers=numbers, count=count)
