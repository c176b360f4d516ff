"""Representation inversion: images whose representation at a point matches a target's.

One algorithm covers both papers' recipes (`sweep.kinds.inversion.spec.RECIPE_DEFAULTS`): minimise the relative error
||g(s) - g(t)||_2 / ||g(t)||_2 over images s in [0, 1] by normalised-gradient descent, starting from a seed
image, with an optional L2 bound around the seed and L2 momentum, keeping each image's best iterate.

- `jones` (Jones et al. 2022, Eq. 2 and 4.1): the seed is a test image of another label; 2,000 steps of size
  1/8; L2 momentum 0.9 (Dong et al. 2018): m <- 0.9 m + 0.1 grad / ||grad||_2, s <- s - (1/8) m; no bound in
  effect (the authors' code passes eps 1000 to the robustness library); the best iterate along the path.
- `engstrom` (Balogh & Jelasity 2023, Eq. 3 and Appendix C: "identical to Engstrom et al. 2019b"): the
  robustness library's inversion example: the seed is grey plus Gaussian noise / 20, 10,000 steps of size 1,
  s <- s - grad / ||grad||_2, projected onto the L2 ball of radius 1000 around the seed, then onto [0, 1].

The robustness library steps first and projects after (the L2 ball, then the pixel range); so does this. The
loss of an image is computed at every iterate, the iterate with the smallest is kept (robustness'
`use_best`), and the loss after the last step counts too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass
class Inverted:
    """The result for a batch: the best images, their relative error at the best iterate and the first, and
    the step at which the best was reached (0: the seed itself)."""

    images: torch.Tensor
    loss: torch.Tensor
    loss_start: torch.Tensor
    best_step: torch.Tensor


def relative_error(rep: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """||rep - target||_2 / ||target||_2 per image (representations flattened)."""
    rep, target = rep.flatten(1), target.flatten(1)
    return (rep - target).norm(dim=1) / target.norm(dim=1).clamp_min(1e-12)


def _unit(v: torch.Tensor) -> torch.Tensor:
    return v / v.flatten(1).norm(dim=1).clamp_min(1e-12).view(-1, *[1] * (v.dim() - 1))


def _project(x: torch.Tensor, seed: torch.Tensor, eps: float) -> torch.Tensor:
    diff = (x - seed).renorm(p=2, dim=0, maxnorm=eps)
    return (seed + diff).clamp(0.0, 1.0)


def invert(
    g: Callable[[torch.Tensor], torch.Tensor],
    seed: torch.Tensor,
    target_rep: torch.Tensor,
    *,
    steps: int,
    step_size: float,
    momentum: float = 0.0,
    eps: float = 1000.0,
) -> Inverted:
    """Invert `target_rep` (g of the target images, detached) through `g` starting from `seed` (both on g's
    device; put g's model in eval mode first). The parameters of g get no gradient."""
    target_rep = target_rep.detach()
    seed = seed.detach()
    x = seed.clone()
    m = torch.zeros_like(x)
    best, best_loss = x.clone(), torch.full((len(x),), float("inf"), device=x.device)
    best_step = torch.zeros(len(x), dtype=torch.long, device=x.device)
    loss_start = None
    for step in range(steps + 1):
        x.requires_grad_(True)
        loss = relative_error(g(x), target_rep)
        with torch.no_grad():
            if loss_start is None:
                loss_start = loss.detach().clone()
            better = loss < best_loss
            best[better], best_loss[better], best_step[better] = x[better], loss[better], step
        if step == steps:
            break
        (grad,) = torch.autograd.grad(loss.sum(), x)
        with torch.no_grad():
            g_unit = _unit(grad)
            m = momentum * m + (1.0 - momentum) * g_unit if momentum else g_unit
            x = _project(x - step_size * m, seed, eps)
    return Inverted(best.detach(), best_loss.detach(), loss_start, best_step)


def grey_noise(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """The robustness library's inversion seed: 0.5 + N(0, 1) / 20 per pixel (not clipped: the first step's
    projection does that)."""
    return torch.randn(shape, generator=generator) / 20 + 0.5


def other_label_seeds(labels: torch.Tensor, pool_labels: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """For each target label, the index into the pool of a random image with a different label (Jones et al.
    3.2: seed and target have different labels). Raises when the pool has one label only."""
    if len(torch.unique(pool_labels)) < 2:
        raise ValueError("seed images need a label other than the target's: the image pool has a single label")
    out = torch.empty(len(labels), dtype=torch.long)
    for i, y in enumerate(labels.tolist()):
        candidates = torch.nonzero(pool_labels != y).flatten()
        out[i] = candidates[torch.randint(len(candidates), (1,), generator=generator)]
    return out
