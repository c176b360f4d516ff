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

from collections.abc import Iterable

import torch

from sweep.data.stream import chunks
from sweep.measures import matrices
from sweep.measures.cca import cca, pwcca
from sweep.measures.matrices import (
    as_2d,
    as_f64,
    centre,
    centred_gram,
    centred_second_moment,
    covariances,
    finite,
    pair_2d,
    pair_f64,
    unit,
)

__all__ = [
    "to_2d",
    "linear_cka",
    "StreamedCKA",
    "minibatch_cka",
    "unbiased_hsic",
    "gram",
    "grams",
    "MinibatchCKA",
    "pwcca",
    "cca",
    "opd",
    "dm_distance",
    "dm_sums",
    "numerical_rank",
    "low_rank",
]


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
    features (memory: the input plus two n x n float64 Grams); with more than `ROWS` rows (per-position rows)
    the p x p covariances, accumulated over chunks of rows.
    """
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


class StreamedCKA:
    """Full-batch linear CKA between every representation of side A and every one of side B (the same number as
    `linear_cka` on all the images), accumulated batch by batch in the feature-space form: per representation
    its column sums and p x p second moment, per pair the p x q cross moment, all float64 about a shift (the
    first batch's column means, so large feature means cost no precision). Memory: those products, whatever
    the number of images; worth it where they are smaller than the
    activations (`sweep.measures.full_cka.cka_streams`)."""

    def __init__(self) -> None:
        self.n = 0
        self.shift: tuple[list, list] | None = None
        self.sums: tuple[list, list] = ([], [])
        self.moments: tuple[list, list] = ([], [])
        self.cross: list[list[torch.Tensor]] = []

    def update(self, a: list, b: list) -> None:
        """Add one batch: `a` and `b` are lists of activations (first dimension: the same images)."""
        sides = [[finite(x.flatten(1).to(torch.float64)) for x in side] for side in (a, b)]
        if self.shift is None:
            self.shift = tuple([x.mean(0) for x in side] for side in sides)
            self.sums = tuple([torch.zeros_like(c) for c in side] for side in self.shift)
            self.moments = tuple([c.new_zeros(len(c), len(c)) for c in side] for side in self.shift)
            self.cross = [[c.new_zeros(len(c), len(d)) for d in self.shift[1]] for c in self.shift[0]]
        centred = [[x - c for x, c in zip(side, shift)] for side, shift in zip(sides, self.shift)]
        for side in (0, 1):
            for k, x in enumerate(centred[side]):
                self.sums[side][k] += x.sum(0)
                self.moments[side][k] += x.T @ x
        for i, x in enumerate(centred[0]):
            for j, y in enumerate(centred[1]):
                self.cross[i][j] += x.T @ y
        self.n += len(centred[0][0])

    def value(self) -> torch.Tensor:
        """The P x Q CKA matrix (float64)."""
        if self.shift is None:
            raise ValueError("streamed CKA: no batches")

        def about_mean(m, s, t):  # sum (x - mean)(y - mean)^T from the sums about the shift
            return m - torch.outer(s, t) / self.n

        norms = [
            [torch.linalg.matrix_norm(about_mean(m, s, s)) for m, s in zip(self.moments[side], self.sums[side])]
            for side in (0, 1)
        ]
        if any(v == 0 for side in norms for v in side):
            raise ValueError("a representation is constant over the examples (zero after centring)")
        out = torch.zeros(len(norms[0]), len(norms[1]), dtype=torch.float64, device=self.shift[0][0].device)
        for i, (sa, na) in enumerate(zip(self.sums[0], norms[0])):
            for j, (sb, nb) in enumerate(zip(self.sums[1], norms[1])):
                out[i, j] = (about_mean(self.cross[i][j], sa, sb) ** 2).sum() / (na * nb)
        return out


def minibatches(n: int, batch_size: int, passes: int, seed: int):
    """The image indices of every batch, pass by pass: each pass a new order drawn from `seed`; a final batch
    of 3 images or fewer is left out (HSIC_1 needs 4). Yields (pass, indices)."""
    for p in range(passes):
        order = pass_order(n, seed, p)
        for i in range(0, n, batch_size):
            if len(order[i : i + batch_size]) > 3:
                yield p, order[i : i + batch_size]


def pass_order(n: int, seed: int, p: int) -> torch.Tensor:
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed * 1000 + p))


def minibatch_images(xs: tuple, batch_size: int, passes: int, seed: int):
    """The batches of `minibatches` as the images themselves: (pass, a batch of each of `xs`), each read in the
    pass's order (streamed images decoded by the loader's workers, `sweep.data.stream.chunks`)."""
    for p in range(passes):
        order = pass_order(len(xs[0]), seed, p)
        for batch in zip(*(chunks(x, batch_size, order) for x in xs)):
            if len(batch[0]) > 3:
                yield p, batch


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


def opd(a, b) -> float:
    """Orthogonal Procrustes distance (Balogh & Jelasity 2025 Eq. 8) after centring and Frobenius normalisation:
    ||A||^2 + ||B||^2 - 2 ||B^T A||_* = 2 - 2 ||B^T A||_*, in [0, 2]. A with fewer columns is zero-padded
    implicitly (the nuclear norm does not change)."""
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
    a, b = pair_f64(a, b)
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
    a, b = pair_f64(a, b)
    if a.shape[0] < a.shape[1] + 1:
        raise ValueError(
            f"dm_fit: {a.shape[0]} rows for {a.shape[1] + 1} unknowns per output: the least"
            " squares fit is not determined; give more examples"
        )
    a1 = torch.cat([a, torch.ones(a.shape[0], 1, dtype=a.dtype, device=a.device)], dim=1)
    return torch.linalg.pinv(a1) @ b


def dm_error(theta: torch.Tensor, a, b) -> float:
    """The squared relative error ||[A 1] theta - B||_F^2 / ||B||_F^2 of a fitted DM map on (A, B): Balogh & Jelasity
    2025's structural DM distance when theta was fitted on other (training) images."""
    residual, norm_b = dm_sums(theta, a, b)
    if norm_b == 0:
        raise ValueError("dm_error: the target representation is zero")
    return residual / norm_b


def dm_sums(theta: torch.Tensor, a, b) -> tuple[float, float]:
    """(||[A 1] theta - B||_F^2, ||B||_F^2), in float64 over chunks of rows: the DM error's sums, which add up
    over batches of images."""
    a, b = pair_2d(a, b)
    theta = theta.to(device=a.device, dtype=torch.float64)
    weight, bias = theta[:-1], theta[-1]
    residual = norm_b = 0.0
    for start in range(0, a.shape[0], matrices.ROWS):  # rows in float64 chunks: memory does not grow with the rows
        part_a = finite(a[start : start + matrices.ROWS].to(torch.float64))
        part_b = finite(b[start : start + matrices.ROWS].to(device=a.device, dtype=torch.float64))
        residual += float(((part_a @ weight + bias - part_b) ** 2).sum())
        norm_b += float((part_b**2).sum())
    return residual, norm_b


def numerical_rank(a, rel_tol: float = 1e-3) -> int:
    """The number of singular values of A's sample covariance above `rel_tol` times the largest (Smith & Marcu 2024
    B.2.1, after Masarczyk et al.). Computed from the singular values s of the centred A (the covariance's are
    s^2 / (n - 1)), as the eigenvalues of the smaller of A_c A_c^T and A_c^T A_c, each accumulated in chunks: a
    wide A never builds the p x p covariance, and a tall one (positions) is never copied to float64 whole.
    Squaring costs nothing here: the threshold (1e-3 of the largest s^2) is far above float64 rounding."""
    s = torch.linalg.eigvalsh(centred_second_moment(as_2d(a, "A")))
    if s[-1] <= 0:
        return 0
    return int((s > rel_tol * s[-1]).sum())


def low_rank(a, rank: int) -> torch.Tensor:
    """The best rank-`rank` approximation of A around its mean (centred truncated SVD, mean added back)."""
    a = as_f64(a, "A")
    limit = min(a.shape)
    if not isinstance(rank, int) or rank < 1 or rank > limit:
        raise ValueError(
            f"rank: expected an integer in [1, {limit}] (the representation is"
            f" {a.shape[0]} x {a.shape[1]}), found {rank!r}"
        )
    mean = a.mean(dim=0, keepdim=True)
    u, s, vh = torch.linalg.svd(a - mean, full_matrices=False)
    return (u[:, :rank] * s[:rank]) @ vh[:rank] + mean
