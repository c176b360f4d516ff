"""Representation similarity indices: pure math on 2-D arrays (rows = examples, columns = neurons).

No I/O and no device choice: every function takes arrays (torch tensors or numpy arrays) and computes in
float64 on the device its input is on. Indices follow Balogh & Jelasity 2025 Section 2.2-2.3 and the formulations of
Ding, Denain and Steinhardt (2021): representations are centred (and, for PWCCA and OPD, Frobenius-normalised)
before comparison.

- `to_2d`: how an activation tensor becomes an (examples x neurons) matrix.
- `linear_cka` (Eq. 4), `minibatch_cka` (unbiased HSIC, Nguyen et al. 2021; for n that does not fit).
- `pwcca` (Eq. 5-6), `opd` (Eq. 7-8), `dm_distance` (Section 2.3: the direct-matching residual).
- `numerical_rank` (Smith & Marcu 2024 B.2.1), `low_rank` (centred SVD approximation, Balogh & Jelasity 2025
sensitivity test).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import torch

__all__ = [
    "to_2d",
    "linear_cka",
    "minibatch_cka",
    "unbiased_hsic",
    "gram",
    "grams",
    "MinibatchCKA",
    "pwcca",
    "cca",
    "opd",
    "dm_distance",
    "numerical_rank",
    "low_rank",
]


def _as_f64(a, name: str) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(a) if not isinstance(a, torch.Tensor) else a)
    t = t.detach().to(torch.float64)
    if t.dim() != 2:
        raise ValueError(
            f"{name}: expected a 2-D (examples x neurons) array, found shape {tuple(t.shape)};"
            " use to_2d() on activation tensors first"
        )
    if t.shape[0] == 0 or t.shape[1] == 0:
        raise ValueError(f"{name}: empty representation of shape {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name}: representation holds NaN or infinite values")
    return t


def _pair(a, b) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = _as_f64(a, "A"), _as_f64(b, "B")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"A and B must hold the same examples: {a.shape[0]} rows vs {b.shape[0]}")
    return a, b.to(a.device)


def _as_2d(a, name: str) -> torch.Tensor:
    """`a` as a 2-D tensor in its own dtype, not copied (the whole-matrix float64 copy is what the streamed
    forms avoid); finiteness is checked chunk by chunk where it is read."""
    t = torch.as_tensor(np.asarray(a) if not isinstance(a, torch.Tensor) else a).detach()
    if t.dim() != 2:
        raise ValueError(
            f"{name}: expected a 2-D (examples x neurons) array, found shape {tuple(t.shape)};"
            " use to_2d() on activation tensors first"
        )
    if t.shape[0] == 0 or t.shape[1] == 0:
        raise ValueError(f"{name}: empty representation of shape {tuple(t.shape)}")
    return t


def _pair_2d(a, b) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = _as_2d(a, "A"), _as_2d(b, "B")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"A and B must hold the same examples: {a.shape[0]} rows vs {b.shape[0]}")
    return a, b


def _finite(part: torch.Tensor) -> torch.Tensor:
    if not torch.isfinite(part).all():
        raise ValueError("a representation holds NaN or infinite values")
    return part


ROWS = 65536  # rows per chunk of the streamed forms (64 channels: 32 MiB of float64)


def _row_chunks(a: torch.Tensor):
    """A's rows in float64 chunks of `ROWS` (checked finite): the streamed forms never hold A in float64 whole."""
    for start in range(0, a.shape[0], ROWS):
        yield _finite(a[start : start + ROWS].to(torch.float64))


def _column_means(a: torch.Tensor) -> torch.Tensor:
    return sum(part.sum(0) for part in _row_chunks(a)) / a.shape[0]


def centred_covariance(a) -> torch.Tensor:
    """A_c^T A_c (p x p, float64) of the column-centred A, accumulated over chunks of rows: for a tall A (many
    rows, few columns: the `positions` layout) in memory that does not grow with the rows."""
    a = _as_2d(a, "A")
    mean = _column_means(a)
    cov = torch.zeros(a.shape[1], a.shape[1], dtype=torch.float64, device=a.device)
    for part in _row_chunks(a):
        part = part - mean
        cov += part.T @ part
    return cov


def _centred_second_moment(a: torch.Tensor) -> torch.Tensor:
    """The smaller of A_c A_c^T (n x n, chunks of columns) and A_c^T A_c (p x p, chunks of rows): the two
    share their nonzero eigenvalues, the squared singular values of the centred A."""
    return centred_gram(a) if a.shape[0] <= a.shape[1] else centred_covariance(a)


def _centre(a: torch.Tensor) -> torch.Tensor:
    return a - a.mean(dim=0, keepdim=True)


def _unit(a: torch.Tensor) -> torch.Tensor:
    norm = torch.linalg.matrix_norm(a)
    if norm == 0:
        raise ValueError("a representation is constant over the examples (zero after centring)")
    return a / norm


def to_2d(activations, layout: str = "flatten") -> torch.Tensor:
    """Activations -> a 2-D matrix.

    - `"flatten"` (the convention of Kornblith et al. and Ding et al. for comparing layers): one row per
      example, every (channel, position) a column: (N, C, H, W) -> (N, C*H*W), tokens (N, T, D) -> (N, T*D).
    - `"positions"` (what a 1x1-conv / per-token stitcher sees, used by direct matching): one row per
      example and position, channels as columns: (N, C, H, W) -> (N*H*W, C), (N, T, D) -> (N*T, D).
    - `"pooled"`: one row per example, the mean over positions (or tokens) of every channel: (N, C). Used
      for PWCCA, which degenerates when neurons outnumber examples.
    2-D input is returned as is.
    """
    a = torch.as_tensor(activations)
    if a.dim() == 2:
        return a
    if layout == "flatten":
        return a.reshape(a.shape[0], -1)
    if layout == "pooled" and a.dim() in (3, 4):
        return a.mean(dim=(2, 3)) if a.dim() == 4 else a.mean(dim=1)
    if layout == "positions":
        if a.dim() == 4:
            return a.permute(0, 2, 3, 1).reshape(-1, a.shape[1])
        if a.dim() == 3:
            return a.reshape(-1, a.shape[-1])
    if layout not in ("flatten", "positions", "pooled"):
        raise ValueError(f"layout: expected 'flatten', 'positions' or 'pooled', found {layout!r}")
    raise ValueError(f"expected (N, C, H, W), (N, tokens, dim) or 2-D activations, found {tuple(a.shape)}")


def linear_cka(a, b) -> float:
    """Linear CKA (Balogh & Jelasity 2025 Eq. 4) of column-centred A and B: ||B^T A||_F^2 / (||A^T A||_F ||B^T B||_F).

    Computed in float64 as sums of squares. The feature-space form (p x p products) is used when it is the
    smaller one; with more neurons than examples the equal Gram form (n x n), accumulated over chunks of
    features (memory: the input plus two n x n float64 Grams).
    """
    a, b = _pair_2d(a, b)
    n, pa, pb = a.shape[0], a.shape[1], b.shape[1]
    if n < max(pa, pb):  # tr(KL) with K = AA^T, L = BB^T: the same number, smaller matrices
        k = centred_gram(a)  # accumulated over chunks of features: A is never copied to float64 whole
        l_ = centred_gram(b).to(k.device)
        num, da, db = (k * l_).sum(), (k * k).sum().sqrt(), (l_ * l_).sum().sqrt()
    else:
        a, b = _pair(a, b)
        a, b = _centre(a), _centre(b)
        num = ((b.T @ a) ** 2).sum()
        da, db = ((a.T @ a) ** 2).sum().sqrt(), ((b.T @ b) ** 2).sum().sqrt()
    if da == 0 or db == 0:
        raise ValueError("a representation is constant over the examples (zero after centring)")
    return float(num / (da * db))


def unbiased_hsic(k: torch.Tensor, l_: torch.Tensor) -> torch.Tensor:
    """The unbiased HSIC estimator of Song et al. (2012) on two n x n Gram matrices (n > 3)."""
    return _hsic_pairs(_zero_diagonal(k)[None], _zero_diagonal(l_)[None])[0, 0]


def _zero_diagonal(k: torch.Tensor) -> torch.Tensor:
    k = k.to(torch.float64).clone()
    k.diagonal(dim1=-2, dim2=-1).zero_()
    return k


def _hsic_pairs(k: torch.Tensor, l_: torch.Tensor) -> torch.Tensor:
    """HSIC_1 of every pair of zero-diagonal Grams: k (P, n, n), l (Q, n, n) -> (P, Q), in three products:
    tr(K L) = <K, L>, 1'K1 1'L1, and 1'K L 1 = (K1).(L1) (Grams are symmetric)."""
    n = k.shape[-1]
    if n <= 3:
        raise ValueError(f"unbiased HSIC needs more than 3 examples per batch, found {n}")
    trace = k.reshape(len(k), -1) @ l_.reshape(len(l_), -1).T
    sums = torch.outer(k.sum((1, 2)), l_.sum((1, 2))) / ((n - 1) * (n - 2))
    rows = 2.0 / (n - 2) * (k.sum(2) @ l_.sum(2).T)
    return (trace + sums - rows) / (n * (n - 3))


def centred_gram(a, chunk: int = 16384) -> torch.Tensor:
    """The n x n Gram matrix of A's features centred over the batch, in float64, accumulated over chunks of at
    most `chunk` features (so a wide layer is never held in float64 whole). Centring changes no unbiased
    HSIC (the estimator is invariant to shifting the features) but removes the cancellation that large feature
    means cause."""
    a = torch.as_tensor(a)
    a = a.reshape(a.shape[0], -1)
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"empty representation of shape {tuple(a.shape)}")
    gram = torch.zeros(a.shape[0], a.shape[0], dtype=torch.float64, device=a.device)
    for start in range(0, a.shape[1], chunk):
        part = a[:, start : start + chunk].to(torch.float64)
        if not torch.isfinite(part).all():
            raise ValueError("a representation holds NaN or infinite values")
        part = part - part.mean(dim=0, keepdim=True)
        gram += part @ part.T
    return gram


class MinibatchCKA:
    """Linear CKA between every representation of side A and every one of side B, accumulated over minibatches
    with the unbiased HSIC estimator (Nguyen, Raghu & Kornblith 2021; Cianfarani et al. 2022 2.3):
    CKA_ij = sum_b HSIC_1(K_ib, L_jb) / sqrt(sum_b HSIC_1(K_ib, K_ib) sum_b HSIC_1(L_jb, L_jb)).

    Memory does not grow with the number of images: per batch one n_b x n_b Gram per representation, and the
    P x Q accumulators. Features are centred per batch (exact: HSIC_1 is shift-invariant), so large feature
    means cost no precision."""

    def __init__(self) -> None:
        self.kl: torch.Tensor | None = None
        self.kk: torch.Tensor | None = None
        self.ll: torch.Tensor | None = None
        self.batches = 0

    def update(self, a: list, b: list) -> None:
        """Add one batch: `a` and `b` are lists of activations (any shape, first dimension: the same images)."""
        k = grams(a)
        self.update_grams(k, k if b is a else grams(b))

    def update_grams(self, k: torch.Tensor, l_: torch.Tensor) -> None:
        """Add one batch given as Grams (`grams`): (P, n, n) and (Q, n, n); pass the same tensor twice for the
        matrix of A with itself."""
        same = l_ is k
        if k.shape[-1] != l_.shape[-1]:
            raise ValueError(f"A and B must hold the same examples: {k.shape[-1]} rows vs {l_.shape[-1]}")
        kl = _hsic_pairs(k, l_)
        kk = torch.diagonal(kl) if same else torch.diagonal(_hsic_pairs(k, k))
        ll = kk if same else torch.diagonal(_hsic_pairs(l_, l_))
        if self.kl is None:
            self.kl, self.kk, self.ll = kl, kk, ll
        else:
            self.kl, self.kk, self.ll = self.kl + kl, self.kk + kk, self.ll + ll
        self.batches += 1

    def value(self) -> torch.Tensor:
        """The P x Q CKA matrix (float64). A representation with no variance across the batches is an error."""
        if self.kl is None:
            raise ValueError("minibatch CKA: no batches")
        if (self.kk <= 0).any() or (self.ll <= 0).any():
            raise ValueError("minibatch CKA: a representation has no variance across the batches")
        return self.kl / torch.sqrt(torch.outer(self.kk, self.ll))


def minibatches(n: int, batch_size: int, passes: int, seed: int):
    """The image indices of every batch, pass by pass: each pass a new order drawn from `seed`; a final batch
    of 3 images or fewer is left out (HSIC_1 needs 4). Yields (pass, indices)."""
    for p in range(passes):
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 1000 + p))
        for i in range(0, n, batch_size):
            if len(order[i : i + batch_size]) > 3:
                yield p, order[i : i + batch_size]


def gram(x) -> torch.Tensor:
    """The zero-diagonal Gram of batch-centred features that `MinibatchCKA` accumulates for one representation
    (n x n, float64): the only thing the estimator needs of a batch's activations."""
    return _zero_diagonal(centred_gram(x))


def grams(reps: list) -> torch.Tensor:
    """`gram` of every representation of a batch, stacked: (len(reps), n, n)."""
    return torch.stack([gram(x) for x in reps])


def minibatch_cka(batches: Iterable[tuple[object, object]]) -> float:
    """Minibatch linear CKA of one pair of representations (see `MinibatchCKA`). `batches` yields (A_i, B_i)
    over the same examples; each batch needs more than 3 examples."""
    acc = MinibatchCKA()
    for a, b in batches:
        acc.update([a], [b])
    return float(acc.value()[0, 0])


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


def _dtype(a) -> torch.dtype:
    return a.dtype if isinstance(a, torch.Tensor) else torch.as_tensor(np.asarray(a)).dtype


def cca(a, b) -> tuple[torch.Tensor, torch.Tensor]:
    """Canonical correlations of A and B (Balogh & Jelasity 2025 Eq. 5), one per canonical direction of A, in decreasing
    order, and A's canonical variates (unit-norm columns A w_A^i), via orthonormal bases of the centred column
    spaces and one SVD.

    Every direction of A's column space is returned: the directions B cannot match (beyond B's rank) have
    rho = 0, as in Ding et al.'s zero-padded PWCCA. The rank of each side is numerical, with a tolerance
    set from the precision the data came in (float32 rounding noise is not a direction)."""
    ta, tb = _dtype(a), _dtype(b)
    a, b = _pair(a, b)
    return _cca(_centre(a), _centre(b), ta, tb)


def _cca(a: torch.Tensor, b: torch.Tensor, ta: torch.dtype, tb: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    qa, qb = _basis(a, _rank_tol(a, ta)), _basis(b, _rank_tol(b, tb))
    u, s, _ = torch.linalg.svd(qa.T @ qb, full_matrices=True)  # u: every direction of A's column space
    rho = torch.zeros(qa.shape[1], dtype=qa.dtype, device=qa.device)
    rho[: len(s)] = s.clamp(0.0, 1.0)
    return rho, qa @ u


def pwcca(a, b) -> float:
    """Projection-weighted CCA (Balogh & Jelasity 2025 Eq. 6; Morcos et al. 2018) after Ding et al.'s centring and
    Frobenius
    normalisation: sum_i alpha_i rho_i / sum_i alpha_i over all of A's canonical directions,
    alpha_i = sum_j |<A w_A^i, a_j>| over A's neurons, rho_i = 0 for the directions B cannot match.
    Not symmetric: the weights come from the first argument. With more neurons than examples CCA is
    degenerate (every correlation 1); reduce the neurons first (pooling, or fewer positions)."""
    ta, tb = _dtype(a), _dtype(b)
    a, b = _pair(a, b)
    a = _unit(_centre(a))
    rho, h = _cca(a, _centre(b), ta, tb)
    h = _principal_within_ties(h, rho, a)
    alpha = (h.T @ a).abs().sum(dim=1)
    return float((alpha * rho).sum() / alpha.sum())


def _principal_within_ties(h: torch.Tensor, rho: torch.Tensor, a: torch.Tensor, tie: float = 1e-6) -> torch.Tensor:
    """PWCCA's L1 weights depend on the basis chosen inside a subspace of equal correlations: the rho = 0
    directions B cannot match, and rho = 1 when B contains part of A (a low-rank B, A itself). Inside each
    run of tied correlations, rotate to A's principal directions there, so the value is unique and does not
    move with rounding noise (Ding et al.'s code keeps whatever basis its SVD returns)."""
    h = h.clone()
    start = 0
    for i in range(1, len(rho) + 1):
        if i == len(rho) or abs(float(rho[i] - rho[start])) > tie:
            if i - start > 1:
                u, _, _ = torch.linalg.svd(h[:, start:i].T @ a, full_matrices=False)
                h[:, start:i] = h[:, start:i] @ u
            start = i
    return h


def opd(a, b) -> float:
    """Orthogonal Procrustes distance (Balogh & Jelasity 2025 Eq. 8) after centring and Frobenius normalisation:
    ||A||^2 + ||B||^2 - 2 ||B^T A||_* = 2 - 2 ||B^T A||_*, in [0, 2]. A with fewer columns is zero-padded
    implicitly (the nuclear norm does not change)."""
    a, b = _pair_2d(a, b)
    if a.shape[0] < max(a.shape[1], b.shape[1]):  # more neurons than examples: work in the n-dim row space
        xa, xb = _row_factor(a), _row_factor(b).to(a.device)
        nuclear = torch.linalg.svdvals(xb.T @ xa).sum()  # = ||B^T A||_* (orthogonal factors drop)
    else:
        a, b = _pair(a, b)
        a, b = _unit(_centre(a)), _unit(_centre(b))
        nuclear = torch.linalg.svdvals(b.T @ a).sum()
    return float(max(0.0, 2.0 - 2.0 * nuclear))


def _row_factor(a: torch.Tensor) -> torch.Tensor:
    """U S (n x n) of the centred, Frobenius-normalised A = U S V^T, from its n x n Gram (U S^2 U^T, by eigh):
    what OPD needs of a wide A, without A's float64 copy or V (n x p). The Gram squares A's condition:
    singular values below about 1e-8 of the largest come out as rounding noise of that size, under the
    float32 rounding (6e-8) of the activations they came from."""
    k = centred_gram(a)
    total = torch.trace(k)
    if total == 0:
        raise ValueError("a representation is constant over the examples (zero after centring)")
    w, u = torch.linalg.eigh(k / total)
    del k
    return u * w.clamp(min=0.0).sqrt()


def dm_distance(a, b) -> float:
    """The structural direct-matching distance (Balogh & Jelasity 2025 Section 2.3): the normalised residual
    ||[A 1] theta - B||_F / ||B||_F of the least-squares affine map from A to B, solved by pseudo-inverse in
    float64. Rows are whatever the map acts on (for a 1x1-conv stitcher: `to_2d(x, "positions")`)."""
    a, b = _pair(a, b)
    if a.shape[0] < a.shape[1] + 1:
        raise ValueError(
            f"dm_distance: {a.shape[0]} rows for {a.shape[1] + 1} unknowns per output: the least"
            " squares fit is not determined; give more examples"
        )
    a1 = torch.cat([a, torch.ones(a.shape[0], 1, dtype=a.dtype, device=a.device)], dim=1)
    theta = torch.linalg.pinv(a1) @ b
    norm_b = torch.linalg.matrix_norm(b)
    if norm_b == 0:
        raise ValueError("dm_distance: the target representation is zero")
    return float(torch.linalg.matrix_norm(a1 @ theta - b) / norm_b)


def dm_fit(a, b) -> torch.Tensor:
    """The least-squares affine map [A 1] theta ~ B by pseudo-inverse in float64 (direct matching, Balogh & Jelasity
    2025
    Eq. 2-3); returns theta, (A's columns + 1) x B's columns."""
    a, b = _pair(a, b)
    if a.shape[0] < a.shape[1] + 1:
        raise ValueError(
            f"dm_fit: {a.shape[0]} rows for {a.shape[1] + 1} unknowns per output: the least"
            " squares fit is not determined; give more examples"
        )
    a1 = torch.cat([a, torch.ones(a.shape[0], 1, dtype=a.dtype, device=a.device)], dim=1)
    return torch.linalg.pinv(a1) @ b


def dm_error(theta: torch.Tensor, a, b) -> float:
    """The squared relative error ||[A 1] theta - B||_F^2 / ||B||_F^2 of a fitted DM map on (A, B): Balogh & Jelasity
    2025's
    structural DM distance when theta was fitted on other (training) images."""
    a, b = _pair_2d(a, b)
    theta = theta.to(device=a.device, dtype=torch.float64)
    weight, bias = theta[:-1], theta[-1]
    residual = norm_b = 0.0
    for start in range(0, a.shape[0], ROWS):  # rows in float64 chunks: memory does not grow with the rows
        part_a = _finite(a[start : start + ROWS].to(torch.float64))
        part_b = _finite(b[start : start + ROWS].to(device=a.device, dtype=torch.float64))
        residual += float(((part_a @ weight + bias - part_b) ** 2).sum())
        norm_b += float((part_b**2).sum())
    if norm_b == 0:
        raise ValueError("dm_error: the target representation is zero")
    return residual / norm_b


def numerical_rank(a, rel_tol: float = 1e-3) -> int:
    """The number of singular values of A's sample covariance above `rel_tol` times the largest (Smith & Marcu 2024
    B.2.1, after Masarczyk et al.). Computed from the singular values s of the centred A (the covariance's are
    s^2 / (n - 1)), as the eigenvalues of the smaller of A_c A_c^T and A_c^T A_c, each accumulated in chunks: a
    wide A never builds the p x p covariance, and a tall one (positions) is never copied to float64 whole.
    Squaring costs nothing here: the threshold (1e-3 of the largest s^2) is far above float64 rounding."""
    s = torch.linalg.eigvalsh(_centred_second_moment(_as_2d(a, "A")))
    if s[-1] <= 0:
        return 0
    return int((s > rel_tol * s[-1]).sum())


def low_rank(a, rank: int) -> torch.Tensor:
    """The best rank-`rank` approximation of A around its mean (centred truncated SVD, mean added back)."""
    a = _as_f64(a, "A")
    limit = min(a.shape)
    if not isinstance(rank, int) or rank < 1 or rank > limit:
        raise ValueError(
            f"rank: expected an integer in [1, {limit}] (the representation is"
            f" {a.shape[0]} x {a.shape[1]}), found {rank!r}"
        )
    mean = a.mean(dim=0, keepdim=True)
    u, s, vh = torch.linalg.svd(a - mean, full_matrices=False)
    return (u[:, :rank] * s[:rank]) @ vh[:rank] + mean
