"""What the similarity indices share, and the similarity kinds' CKA estimators: pure math on 2-D arrays (rows =
examples, columns = neurons).

No I/O and no device choice: every function takes arrays (torch tensors or numpy arrays) and computes in
float64 on the device its input is on. Each index's own math is in its module of `sweep.measures.indices`
(`cka.linear_cka`, `pwcca.pwcca`, `opd.opd`, `dm.dm_distance`, `rank.numerical_rank`, `svcca.svcca_columns`,
`saliency.saliency_cosines`); the sums they accumulate over chunks are `sweep.measures.matrices`'s.

- `to_2d`: how an activation tensor becomes an (examples x neurons) matrix.
- `minibatch_cka`, `MinibatchCKA` (unbiased HSIC, Nguyen et al. 2021; for n that does not fit), `StreamedCKA`
  (full CKA accumulated batch by batch).
- `low_rank` (centred SVD approximation, Balogh & Jelasity 2025 sensitivity test).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from sweep.data.stream import chunks
from sweep.measures.matrices import as_f64, centred_gram, finite

__all__ = [
    "to_2d",
    "StreamedCKA",
    "minibatch_cka",
    "unbiased_hsic",
    "gram",
    "grams",
    "MinibatchCKA",
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
