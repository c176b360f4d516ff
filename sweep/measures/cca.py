"""Canonical correlations and PWCCA (Balogh & Jelasity 2025 Eq. 5-6; Morcos et al. 2018; Ding et al. 2021's
zero-padded form): from orthonormal bases of the whole matrices, or, for tall matrices (per-position rows), from
p x p covariances accumulated over chunks of rows."""

from __future__ import annotations

import math

import torch

from sweep.measures import matrices
from sweep.measures.matrices import centre, covariances, dtype_of, pair_2d, pair_f64, unit


def _rank_tol(a: torch.Tensor, dtype: torch.dtype) -> float:
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
    return _cca(centre(a), centre(b), ta, tb)


def _cca(a: torch.Tensor, b: torch.Tensor, ta: torch.dtype, tb: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    qa, qb = _basis(a, _rank_tol(a, ta)), _basis(b, _rank_tol(b, tb))
    u, s, _ = torch.linalg.svd(qa.T @ qb, full_matrices=True)  # u: every direction of A's column space
    rho = torch.zeros(qa.shape[1], dtype=qa.dtype, device=qa.device)
    rho[: len(s)] = s.clamp(0.0, 1.0)
    return rho, qa @ u


def pwcca(a, b) -> float:
    """Projection-weighted CCA (Balogh & Jelasity 2025 Eq. 6; Morcos et al. 2018) after Ding et al.'s centring and
    Frobenius normalisation: sum_i alpha_i rho_i / sum_i alpha_i over all of A's canonical directions,
    alpha_i = sum_j |<A w_A^i, a_j>| over A's neurons, rho_i = 0 for the directions B cannot match.
    Not symmetric: the weights come from the first argument. With more neurons than examples CCA is
    degenerate (every correlation 1); reduce the neurons first (pooling, or fewer positions).

    Tall matrices (more than `ROWS` rows: per-position rows) are reduced to their p x p covariances over
    chunks of rows (`_pwcca_tall`), so memory does not grow with the rows."""
    ta, tb = dtype_of(a), dtype_of(b)
    a2, b2 = pair_2d(a, b)
    if a2.shape[0] > matrices.ROWS:
        return _pwcca_tall(a2, b2, ta, tb)
    a, b = pair_f64(a2, b2)
    a = unit(centre(a))
    rho, h = _cca(a, centre(b), ta, tb)
    return _weighted(rho, h.T @ a)


def _weighted(rho: torch.Tensor, proj: torch.Tensor) -> float:
    """PWCCA's sum from the correlations and proj = H^T A (A's canonical variates against its neurons)."""
    alpha = _principal_within_ties(proj, rho).abs().sum(dim=1)
    return float((alpha * rho).sum() / alpha.sum())


def _pwcca_tall(a: torch.Tensor, b: torch.Tensor, ta: torch.dtype, tb: torch.dtype) -> float:
    """PWCCA from the covariances S_aa, S_bb, S_ab of the centred A and B (accumulated over chunks of rows):
    A_c = U S V^T gives A's basis U = A_c V / S, so U^T B_c's basis = W_a^T S_ab W_b with W = V / S, and A's
    canonical variates against its neurons are u^T S V^T / ||A_c||_F. The covariances square the condition,
    so a direction below about 10 sqrt(p eps64) of the largest (1e-6 for p = 64) cannot be told from
    rounding here: such directions are dropped (float32 activations resolve no better)."""
    saa, sbb, sab = covariances(a, b)
    pa, pb = a.shape[1], b.shape[1]
    floor = 10 * math.sqrt(max(pa, pb) * torch.finfo(torch.float64).eps)
    sa, va = _covariance_basis(saa, max(_rank_tol(a, ta), floor))
    sb, vb = _covariance_basis(sbb, max(_rank_tol(b, tb), floor))
    u, s, _ = torch.linalg.svd((va / sa).T @ sab @ (vb / sb), full_matrices=True)
    rho = torch.zeros(len(sa), dtype=torch.float64, device=a.device)
    rho[: len(s)] = s.clamp(0.0, 1.0)
    return _weighted(rho, u.T @ (sa[:, None] * va.T) / torch.trace(saa).sqrt())


def _covariance_basis(cov: torch.Tensor, rel_tol: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The singular values S and right vectors V of the centred A kept at `rel_tol`, from A_c^T A_c."""
    w, v = torch.linalg.eigh(cov)
    s = w.clamp(min=0.0).sqrt().flip(0)
    v = v.flip(1)
    keep = s > rel_tol * s[0] if s[0] > 0 else torch.zeros_like(s, dtype=torch.bool)
    if not keep.any():
        raise ValueError("a representation is constant over the examples (zero after centring)")
    return s[keep], v[:, keep]


def _principal_within_ties(proj: torch.Tensor, rho: torch.Tensor, tie: float = 1e-6) -> torch.Tensor:
    """PWCCA's L1 weights depend on the basis chosen inside a subspace of equal correlations: the rho = 0
    directions B cannot match, and rho = 1 when B contains part of A (a low-rank B, A itself). Inside each
    run of tied correlations, rotate to A's principal directions there (the rows of proj = H^T A rotated by
    the left singular vectors of that block), so the value is unique and does not move with rounding noise
    (Ding et al.'s code keeps whatever basis its SVD returns)."""
    proj = proj.clone()
    start = 0
    for i in range(1, len(rho) + 1):
        if i == len(rho) or abs(float(rho[i] - rho[start])) > tie:
            if i - start > 1:
                u, _, _ = torch.linalg.svd(proj[start:i], full_matrices=False)
                proj[start:i] = u.T @ proj[start:i]
            start = i
    return proj


def svcca(a, b, keep: float = 0.99, max_k: int | None = None) -> float:
    """SVCCA (Raghu et al. 2017): each centred representation reduced to its leading singular directions, the
    fewest that explain `keep` of its variance (99%, as Raghu et al.) and at most `max_k` (None: no cap), then
    the mean of the canonical correlations of the two reductions (min(k_A, k_B) of them)."""
    return svcca_k(a, b, keep, max_k)[0]


def svcca_k(a, b, keep: float = 0.99, max_k: int | None = None) -> tuple[float, int, int]:
    """SVCCA and the directions each side kept, (value, k_A, k_B): with n examples the mean canonical
    correlation of independent data grows with k/n (0.19 at k = 50, 0.33 at 150 for n = 1,000), so a value
    is read against the null at its own k and n."""
    ta, tb = dtype_of(a), dtype_of(b)
    a, b = pair_f64(a, b)
    ra, rb = _leading(centre(a), keep, max_k), _leading(centre(b), keep, max_k)
    rho, _ = _cca(ra, rb, ta, tb)
    return float(rho[: min(ra.shape[1], rb.shape[1])].mean()), ra.shape[1], rb.shape[1]


def svcca_columns(a, b, max_k: int | None = None) -> tuple[float, dict]:
    """SVCCA and the directions each side kept (`svcca_k_a`, `svcca_k_b`: its null depends on them): the
    similarity kind's pairwise measure `svcca`."""
    value, k_a, k_b = svcca_k(a, b, max_k=max_k)
    return value, {"svcca_k_a": k_a, "svcca_k_b": k_b}


def _leading(a: torch.Tensor, keep: float, max_k: int | None = None) -> torch.Tensor:
    """U_k S_k: the centred A's projection on its k leading singular directions, k the fewest whose squared
    singular values reach `keep` of the total, at most `max_k`."""
    u, s, _ = torch.linalg.svd(a, full_matrices=False)
    power = s.square()
    if not len(s) or power.sum() == 0:
        raise ValueError("a representation is constant over the examples (zero after centring)")
    k = min(len(s), int((torch.cumsum(power, 0) / power.sum() < keep).sum()) + 1)
    if max_k is not None:
        k = min(k, max_k)
    return u[:, :k] * s[:k]
