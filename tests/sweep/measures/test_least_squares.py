"""Least squares accumulated over batches (`NormalEquations`: the DM fit in memory that does not grow with K)
against the pseudo-inverse of [A 1] on every row at once, on well-conditioned, ill-conditioned and
rank-deficient data; and the DM fit streamed chunk by chunk against one solved on all its rows."""

import numpy as np
import pytest
import torch

from sweep.data.core import make_splits
from sweep.measures.least_squares import NormalEquations
from sweep.stitching.objectives import direct_match
from tests.sweep.stitching.test_objectives_robust import _ctx, _net


def _pinv_fit(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a1 = torch.cat([a, torch.ones(len(a), 1, dtype=a.dtype)], dim=1)
    return torch.linalg.pinv(a1) @ b


def _accumulate(a: torch.Tensor, b: torch.Tensor, batch: int = 97) -> NormalEquations:
    sums = NormalEquations()
    for i in range(0, len(a), batch):
        sums.update(a[i : i + batch], b[i : i + batch])
    return sums


def _data(singular_values, n=600, q=5, offset=50.0, seed=0):
    """A (n x p) with the given singular values around a large mean; B an affine map of A plus noise."""
    g = torch.Generator().manual_seed(seed)
    p = len(singular_values)
    u, _ = torch.linalg.qr(torch.randn(n, p, generator=g, dtype=torch.float64))
    u = u - u.mean(0)  # centred columns, so the singular values are those of the centred A
    u, _ = torch.linalg.qr(u)
    v, _ = torch.linalg.qr(torch.randn(p, p, generator=g, dtype=torch.float64))
    a = (u * torch.tensor(singular_values, dtype=torch.float64)) @ v.T + offset
    w = torch.randn(p, q, generator=g, dtype=torch.float64)
    b = a @ w + 3.0 + 0.01 * torch.randn(n, q, generator=g, dtype=torch.float64)
    return a, b


def test_well_conditioned_data_gives_the_pseudo_inverse_solution():
    a, b = _data(np.linspace(1.0, 3.0, 12))
    fit = _accumulate(a, b).solve()
    theta = _pinv_fit(a, b)
    # condition 3: the normal equations lose ~1 digit more than the pseudo-inverse; 1e-9 is far above both
    assert torch.allclose(fit.weight, theta[:-1], rtol=1e-9, atol=1e-9)
    assert torch.allclose(fit.bias, theta[-1], rtol=1e-9, atol=1e-9)
    assert fit.rank == 12 and fit.condition == pytest.approx(3.0, rel=1e-6)


def test_ill_conditioned_data_agrees_where_the_data_determines_the_fit():
    """Condition 1e5 (1e10 in the normal equations): the solutions may differ by float64 epsilon x 1e10 ~ 1e-6
    relative, along the weakest direction; the residual, stationary at the optimum, agrees to second order.
    The condition is recorded."""
    a, b = _data(np.logspace(0, -5, 10))
    fit = _accumulate(a, b).solve()
    theta = _pinv_fit(a, b)
    ours, theirs = a @ fit.weight + fit.bias, torch.cat([a, torch.ones(len(a), 1, dtype=a.dtype)], 1) @ theta
    spread = (b - b.mean(0)).norm()
    assert float((ours - theirs).norm() / spread) < 1e-5
    assert float((ours - b).norm()) == pytest.approx(float((theirs - b).norm()), rel=1e-8)
    assert fit.rank == 10 and fit.condition == pytest.approx(1e5, rel=1e-3)


def test_rank_deficient_data_drops_the_directions_it_cannot_determine():
    """A constant column and a duplicated one: two directions of the centred A are zero; the fit keeps the
    other eight and predicts the fitting rows as the pseudo-inverse does."""
    a, b = _data(np.linspace(1.0, 2.0, 8))
    a = torch.cat([a, torch.full((len(a), 1), 7.0, dtype=a.dtype), a[:, :1]], dim=1)
    fit = _accumulate(a, b).solve()
    theirs = torch.cat([a, torch.ones(len(a), 1, dtype=a.dtype)], 1) @ _pinv_fit(a, b)
    assert fit.rank == 8
    assert float((a @ fit.weight + fit.bias - theirs).norm() / b.norm()) < 1e-9


def test_moments_and_bad_input():
    a, b = _data(np.linspace(1.0, 2.0, 6), offset=1e4)  # large means: the batches are shifted before summing
    sums = _accumulate(a, b)
    mean_a, mean_b = sums.means()
    var_a, var_b = sums.variances()
    assert torch.allclose(mean_a, a.mean(0), rtol=1e-12) and torch.allclose(mean_b, b.mean(0), rtol=1e-12)
    assert torch.allclose(var_a, a.var(0), rtol=1e-8) and torch.allclose(var_b, b.var(0), rtol=1e-8)
    with pytest.raises(ValueError, match=r"same rows, found \(3, 6\) and \(2, 5\)"):
        sums.update(a[:3], b[:2])
    with pytest.raises(ValueError, match="at least 2 are needed"):
        NormalEquations().solve()


@pytest.mark.parametrize("kind", ["affine", "bn_affine_bn"])
def test_the_streamed_dm_fit_is_the_one_solved_on_all_rows(kind):
    """DM between two different networks, accumulated over chunks of images: the stitcher's map and the
    residual are the pseudo-inverse solution on every row at once (the fit before the bounded-memory work)."""
    splits = make_splits("digits", None, 200, None)
    ctx = _ctx(_net(), "layer2.1", {"dm_samples": 120, "stitcher": kind}, splits)
    other = _net(seed=1)
    ctx.end_front = _ctx(other, "layer2.1", {"dm_samples": 120, "stitcher": kind}, splits).end_front
    out = direct_match(ctx)
    x = splits.train_x[:120]
    with torch.no_grad():
        a, b = ctx.front(x), ctx.end_front(x)
    a = a.permute(0, 2, 3, 1).reshape(-1, a.shape[1]).double()
    b = b.permute(0, 2, 3, 1).reshape(-1, b.shape[1]).double()
    if kind == "bn_affine_bn":
        a = (a - a.mean(0)) / (a.var(0) + ctx.stitcher.bn_in.eps).sqrt()
        b = (b - b.mean(0)) / b.var(0).clamp_min(1e-12).sqrt() * (1.0 + ctx.stitcher.bn_out.eps) ** 0.5
    theta = _pinv_fit(a, b)
    a1 = torch.cat([a, torch.ones(len(a), 1, dtype=a.dtype)], 1)
    residual = float((a1 @ theta - b).norm() / b.norm())
    assert 0.01 < out["dm_residual"] and out["dm_residual"] == pytest.approx(residual, rel=1e-6)
    assert out["dm_condition"] >= 1.0
    # the stitcher's float32 parameters: agreement to float32 rounding of the weights' scale
    weight = ctx.stitcher.map.weight.detach()
    w = weight.reshape(weight.shape[0], -1).T.double()
    assert torch.allclose(w, theta[:-1], atol=1e-4 * float(theta[:-1].abs().max()))
    assert torch.allclose(ctx.stitcher.map.bias.detach().double(), theta[-1], atol=1e-4 * float(theta.abs().max()))
