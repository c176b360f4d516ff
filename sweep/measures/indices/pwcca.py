"""Projection-weighted CCA (Balogh & Jelasity 2025 Eq. 5-6; Morcos et al. 2018; Ding et al. 2021's zero-padded
form): its catalogue entry, its memory and work models, its math (from orthonormal bases of the whole matrices,
or, for tall matrices, from p x p covariances accumulated over chunks of rows; the canonical correlations
themselves are `sweep.measures.cca`'s) and its registration."""

from __future__ import annotations

import math

from sweep.costs.memory import ROW_CHUNK, covariances, whole
from sweep.costs.work import Work, mp2
from sweep.costs.work import covariances as covariance_work
from sweep.measures.indices.base import register_index
from sweep.store.catalogue import IndexEntry

ENTRY = IndexEntry(
    "pwcca",
    ("sim_pwcca",),
    "pwcca",
    "similarity",
    reptest_column="d_pwcca",
    reptest_label="pwcca",
    description="projection-weighted CCA (Morcos et al. 2018), weights from the first argument's directions",
)


def numbers(rows: int, pa: int, pb: int) -> int:
    """PWCCA: covariances on tall matrices, else 6 float64 copies per side and its bases."""
    if rows > ROW_CHUNK and rows >= max(pa, pb):
        return covariances(rows, pa, pb)
    return whole(rows, pa, pb, 6) + 2 * rows * min(rows, pa)


def count(rows: int, pa: int, pb: int) -> Work:
    """PWCCA: tall, covariances, each side's eigendecomposition, the whitened cross-covariance's SVD; else each
    side's basis (thin SVDs) and the projections."""
    one = Work(calls=1)
    if rows > ROW_CHUNK:
        cross = Work(decomp=pa**3 + pb**3 + mp2(pa, pb), mac=pa * pa * pb + pa * pb * pb + 2 * pa**3)
        return one + covariance_work(rows, pa, pb) + cross
    ra, rb = min(rows, pa), min(rows, pb)  # the bases' widths, at most
    bases = Work(decomp=mp2(rows, pa) + mp2(rows, pb) + mp2(ra, rb), elem=6 * rows * (pa + pb))
    return one + bases + Work(mac=rows * ra * rb + rows * ra * ra + ra * rows * pa)


def pwcca(a, b) -> float:
    """Projection-weighted CCA (Balogh & Jelasity 2025 Eq. 6; Morcos et al. 2018) after Ding et al.'s centring and
    Frobenius normalisation: sum_i alpha_i rho_i / sum_i alpha_i over all of A's canonical directions,
    alpha_i = sum_j |<A w_A^i, a_j>| over A's neurons, rho_i = 0 for the directions B cannot match.
    Not symmetric: the weights come from the first argument. With more neurons than examples CCA is
    degenerate (every correlation 1); reduce the neurons first (pooling, or fewer positions).

    Tall matrices (more than `ROWS` rows: per-position rows) are reduced to their p x p covariances over
    chunks of rows (`_pwcca_tall`), so memory does not grow with the rows."""
    from sweep.measures import matrices
    from sweep.measures.cca import centred_cca
    from sweep.measures.matrices import centre, dtype_of, pair_2d, pair_f64, unit

    ta, tb = dtype_of(a), dtype_of(b)
    a2, b2 = pair_2d(a, b)
    if a2.shape[0] > matrices.ROWS:
        return _pwcca_tall(a2, b2, ta, tb)
    a, b = pair_f64(a2, b2)
    a = unit(centre(a))
    rho, h = centred_cca(a, centre(b), ta, tb)
    return _weighted(rho, h.T @ a)


def _weighted(rho, proj) -> float:
    """PWCCA's sum from the correlations and proj = H^T A (A's canonical variates against its neurons)."""
    alpha = _principal_within_ties(proj, rho).abs().sum(dim=1)
    return float((alpha * rho).sum() / alpha.sum())


def _pwcca_tall(a, b, ta, tb) -> float:
    """PWCCA from the covariances S_aa, S_bb, S_ab of the centred A and B (accumulated over chunks of rows):
    A_c = U S V^T gives A's basis U = A_c V / S, so U^T B_c's basis = W_a^T S_ab W_b with W = V / S, and A's
    canonical variates against its neurons are u^T S V^T / ||A_c||_F. The covariances square the condition,
    so a direction below about 10 sqrt(p eps64) of the largest (1e-6 for p = 64) cannot be told from
    rounding here: such directions are dropped (float32 activations resolve no better)."""
    import torch

    from sweep.measures.cca import rank_tol
    from sweep.measures.matrices import covariances

    saa, sbb, sab = covariances(a, b)
    pa, pb = a.shape[1], b.shape[1]
    floor = 10 * math.sqrt(max(pa, pb) * torch.finfo(torch.float64).eps)
    sa, va = _covariance_basis(saa, max(rank_tol(a, ta), floor))
    sb, vb = _covariance_basis(sbb, max(rank_tol(b, tb), floor))
    u, s, _ = torch.linalg.svd((va / sa).T @ sab @ (vb / sb), full_matrices=True)
    rho = torch.zeros(len(sa), dtype=torch.float64, device=a.device)
    rho[: len(s)] = s.clamp(0.0, 1.0)
    return _weighted(rho, u.T @ (sa[:, None] * va.T) / torch.trace(saa).sqrt())


def _covariance_basis(cov, rel_tol: float):
    """The singular values S and right vectors V of the centred A kept at `rel_tol`, from A_c^T A_c."""
    import torch

    w, v = torch.linalg.eigh(cov)
    s = w.clamp(min=0.0).sqrt().flip(0)
    v = v.flip(1)
    keep = s > rel_tol * s[0] if s[0] > 0 else torch.zeros_like(s, dtype=torch.bool)
    if not keep.any():
        raise ValueError("a representation is constant over the examples (zero after centring)")
    return s[keep], v[:, keep]


def _principal_within_ties(proj, rho, tie: float = 1e-6):
    """PWCCA's L1 weights depend on the basis chosen inside a subspace of equal correlations: the rho = 0
    directions B cannot match, and rho = 1 when B contains part of A (a low-rank B, A itself). Inside each
    run of tied correlations, rotate to A's principal directions there (the rows of proj = H^T A rotated by
    the left singular vectors of that block), so the value is unique and does not move with rounding noise
    (Ding et al.'s code keeps whatever basis its SVD returns)."""
    import torch

    proj = proj.clone()
    start = 0
    for i in range(1, len(rho) + 1):
        if i == len(rho) or abs(float(rho[i] - rho[start])) > tie:
            if i - start > 1:
                u, _, _ = torch.linalg.svd(proj[start:i], full_matrices=False)
                proj[start:i] = u.T @ proj[start:i]
            start = i
    return proj


# Eq. 5-6, weights: A (in representation tests, the reference: Ding et al. score d(A, B) with A first)
INDEX = register_index(
    ENTRY, pwcca, "pooled", symmetric=False, target_first_in_reptests=True, numbers=numbers, count=count
)
