"""Canonical correlations (Balogh & Jelasity 2025 Eq. 5; Ding et al. 2021's zero-padded form), from orthonormal
bases of the centred column spaces: what PWCCA (`sweep.measures.indices.pwcca`) and SVCCA
(`sweep.measures.indices.svcca`) are computed from."""

from __future__ import annotations

import math

import torch

from sweep.measures.matrices import centre, dtype_of, pair_f64


def rank_tol(a: torch.Tensor, dtype: torch.dtype) -> float:
    """The relative singular-value threshold below which a direction of `a` is rounding noise: the data's own
    rounding (each entry off by at most eps of the precision it came in, so by Weyl's inequality no singular
    value moves by more than eps ||A||_F <= eps sqrt(min(n, p)) s_max) plus the float64 computation's
    (numpy's matrix_rank rule, max(n, p) eps64). numpy's rule with the data's eps, used before, grows with
    the rows: with 1,024,000 per-position rows of float32 it dropped every direction below 12% of the largest."""
    f64 = torch.finfo(torch.float64).eps
    eps = torch.finfo(dtype).eps if dtype.is_floating_point else f64
    return math.sqrt(min(a.shape)) * eps + max(a.shape) * f64


def _basis(a: torch.Tensor, rel_tol: float) -> torch.Tensor:
    """An orthonormal basis of the column space of A (rank-revealing: singular values below rel_tol * the
    largest dropped)."""
    u, s, _ = torch.linalg.svd(a, full_matrices=False)
    keep = s > rel_tol * s[0] if len(s) and s[0] > 0 else torch.zeros_like(s, dtype=torch.bool)
    if not keep.any():
        raise ValueError("a representation is constant over the examples (zero after centring)")
    return u[:, keep]


def cca(a, b) -> tuple[torch.Tensor, torch.Tensor]:
    """Canonical correlations of A and B (Balogh & Jelasity 2025 Eq. 5), one per canonical direction of A, in decreasing
    order, and A's canonical variates (unit-norm columns A w_A^i), via orthonormal bases of the centred column
    spaces and one SVD.

    Every direction of A's column space is returned: the directions B cannot match (beyond B's rank) have
    rho = 0, as in Ding et al.'s zero-padded PWCCA. The rank of each side is numerical, with a tolerance
    set from the precision the data came in (float32 rounding noise is not a direction)."""
    ta, tb = dtype_of(a), dtype_of(b)
    a, b = pair_f64(a, b)
    return centred_cca(centre(a), centre(b), ta, tb)


def centred_cca(
    a: torch.Tensor, b: torch.Tensor, ta: torch.dtype, tb: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """`cca` of centred float64 A and B, whose data came in `ta` and `tb` (their rank tolerances)."""
    qa, qb = _basis(a, rank_tol(a, ta)), _basis(b, rank_tol(b, tb))
    u, s, _ = torch.linalg.svd(qa.T @ qb, full_matrices=True)  # u: every direction of A's column space
    rho = torch.zeros(qa.shape[1], dtype=qa.dtype, device=qa.device)
    rho[: len(s)] = s.clamp(0.0, 1.0)
    return rho, qa @ u
