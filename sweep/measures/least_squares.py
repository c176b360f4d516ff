"""Affine least squares accumulated over batches: the direct-matching fit (Balogh & Jelasity 2025 Eq. 2-3) and
Jones et al. 2022's penultimate-layer fit, in memory that does not grow with the number of rows.

`NormalEquations.update(a, b)` adds one batch of rows (A: inputs, B: targets) to float64 sums: the column sums
and the cross-products A^T A, A^T B, after shifting every batch by the first batch's column means (a constant
shift, so large feature means cost no precision). `solve()` centres the sums exactly with the final means and
solves the centred normal equations by a symmetric pseudo-inverse; the intercept then fits the means exactly.
Memory: p^2 + p q float64 numbers (p inputs, q targets), whatever K.

How this relates to the pseudo-inverse of [A 1] on all rows at once (what the fits did before):

- With a centred A of full column rank, both give the same least-squares solution.
- Normal equations square the condition number. Eigenvalues of A^T A below `rtol` (default: p x float64
  epsilon) times the largest are dropped, i.e. directions of A whose singular value is below about
  sqrt(rtol) (1e-7 for p = 64) of the largest. Activations come in float32 (relative rounding 6e-8), so such
  directions are rounding noise of the data.
- In a rank-deficient fit (a channel constant over every row), the minimum-norm solution is over the weights,
  with the intercept fitted exactly; [A 1]'s pseudo-inverse spreads a constant channel's part over its weight
  and the intercept. Predictions on the fitting rows are the same.

`condition` (the ratio of A's largest to smallest kept singular value, centred and after any scaling) is
recorded beside the residual.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass
class Solution:
    """weight (p x q) and bias (q) of B ~ A weight + bias; `condition`: of the centred A; `rank`: directions kept."""

    weight: torch.Tensor
    bias: torch.Tensor
    condition: float
    rank: int


class NormalEquations:
    """Sums of one affine least-squares problem, added batch by batch (see the module)."""

    def __init__(self) -> None:
        self.n = 0
        self.shift_a: torch.Tensor | None = None

    def update(self, a: torch.Tensor, b: torch.Tensor) -> None:
        """Add rows: `a` (m x p) and `b` (m x q), the same m examples (any float dtype, any device)."""
        if a.dim() != 2 or b.dim() != 2 or len(a) != len(b):
            raise ValueError(f"expected 2-D A and B with the same rows, found {tuple(a.shape)} and {tuple(b.shape)}")
        a, b = a.double(), b.double()
        if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
            raise ValueError("least squares: the activations hold NaN or infinite values")
        if self.shift_a is None:
            self.shift_a, self.shift_b = a.mean(0), b.mean(0)
            p, q = a.shape[1], b.shape[1]
            self.aa = a.new_zeros(p, p)
            self.ab = a.new_zeros(p, q)
            self.sa, self.sb, self.bb = a.new_zeros(p), a.new_zeros(q), a.new_zeros(q)
        elif a.shape[1] != self.aa.shape[0] or b.shape[1] != self.ab.shape[1]:
            raise ValueError(
                f"least squares: batch of {a.shape[1]} -> {b.shape[1]} columns after {tuple(self.ab.shape)}"
            )
        a, b = a - self.shift_a, b - self.shift_b
        self.aa += a.T @ a
        self.ab += a.T @ b
        self.sa += a.sum(0)
        self.sb += b.sum(0)
        self.bb += (b * b).sum(0)
        self.n += len(a)

    def _centred(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        if self.n < 2:
            raise ValueError(f"least squares: {self.n} rows; at least 2 are needed")
        ma, mb = self.sa / self.n, self.sb / self.n  # means of the shifted data
        return self.aa - self.n * torch.outer(ma, ma), self.ab - self.n * torch.outer(ma, mb), ma, mb

    def means(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The column means of A and of B."""
        return self.shift_a + self.sa / self.n, self.shift_b + self.sb / self.n

    def variances(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The columns' unbiased variances of A and of B (as `Tensor.var(0)`)."""
        saa, _, _, mb = self._centred()
        vb = (self.bb - self.n * mb * mb) / (self.n - 1)
        return torch.diagonal(saa).clamp_min(0) / (self.n - 1), vb.clamp_min(0)

    def solve(self, scale_a: torch.Tensor | None = None, scale_b: torch.Tensor | None = None, rtol=None) -> Solution:
        """The least-squares affine map, optionally between rescaled variables A' = (A - mean) * scale_a and
        B' = (B - mean) * scale_b (then the bias is 0: both sides are centred)."""
        saa, sab, _, _ = self._centred()
        if scale_a is not None:
            scale_a = scale_a.double()
            saa = saa * torch.outer(scale_a, scale_a)
            sab = sab * scale_a[:, None]
        if scale_b is not None:
            sab = sab * scale_b.double()[None, :]
        vals, vecs = torch.linalg.eigh(saa)
        top = float(vals[-1]) if len(vals) else 0.0
        if top <= 0:
            raise ValueError("least squares: A is constant over every row (zero after centring)")
        rtol = saa.shape[0] * torch.finfo(torch.float64).eps if rtol is None else rtol
        keep = vals > rtol * top
        inv = (vecs[:, keep] / vals[keep]) @ vecs[:, keep].T
        weight = inv @ sab
        mean_a, mean_b = self.means()
        if scale_a is None and scale_b is None:
            bias = mean_b - mean_a @ weight
        else:
            bias = torch.zeros(weight.shape[1], dtype=torch.float64, device=weight.device)
        condition = math.sqrt(top / float(vals[keep].min()))
        return Solution(weight, bias, condition, int(keep.sum()))
