"""Training-time augmentations of donors (Balogh & Jelasity 2023 A.2), applied to whole batches of [0, 1] pixels.

- `crop`: pad by 4 pixels (zeros) and crop back at a random offset, per image;
- `flip`: horizontal flip with probability 1/2, per image;
- `affine`: random rotation and shear of at most 5 degrees and scaling in [0.9, 1.1] (the MNIST setting).

The random draws come from the training loop's CPU generator (so a run's augmentations do not depend on the device)
and reach the batch's device in one non-blocking copy from pinned memory; the pixels are moved by whole-batch
operations there (one gather for every crop). Nothing here waits for the device.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from sweep.data.declared import register_augmentation  # noqa: F401  (re-exported)
from sweep.registry import AUGMENTATIONS


def _uniform(n: int, low: float, high: float, gen: torch.Generator) -> torch.Tensor:
    return torch.rand(n, generator=gen) * (high - low) + low


def to_batch_device(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A CPU tensor of draws on `x`'s device. To a GPU it goes from pinned memory without blocking: a copy from
    ordinary (pageable) memory waits for every queued kernel first, one stall of the device per batch."""
    if x.device.type != "cuda":
        return t.to(x.device)
    return t.pin_memory().to(x.device, non_blocking=True)


def random_crop(x: torch.Tensor, gen: torch.Generator, pad: int = 4) -> torch.Tensor:
    n, c, h, w = x.shape
    padded = F.pad(x, (pad, pad, pad, pad))
    dy = torch.randint(0, 2 * pad + 1, (n,), generator=gen)
    dx = torch.randint(0, 2 * pad + 1, (n,), generator=gen)
    offsets = to_batch_device(torch.stack([dy, dx]), x)
    rows = (offsets[0].view(n, 1) + torch.arange(h, device=x.device)).view(n, 1, h, 1)
    cols = (offsets[1].view(n, 1) + torch.arange(w, device=x.device)).view(n, 1, 1, w)
    images = torch.arange(n, device=x.device).view(n, 1, 1, 1)
    channels = torch.arange(c, device=x.device).view(1, c, 1, 1)
    return padded[images, channels, rows, cols]  # image i's h x w window at (dy[i], dx[i]), one gather


def random_flip(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    flip = to_batch_device(torch.rand(len(x), generator=gen) < 0.5, x)
    return torch.where(flip.view(-1, 1, 1, 1), x.flip(-1), x)


def random_affine(
    x: torch.Tensor,
    gen: torch.Generator,
    degrees: float = 5.0,
    shear: float = 5.0,
    scale: tuple[float, float] = (0.9, 1.1),
) -> torch.Tensor:
    n = len(x)
    angle = _uniform(n, -degrees, degrees, gen) * math.pi / 180
    sh = _uniform(n, -shear, shear, gen) * math.pi / 180
    s = _uniform(n, *scale, gen)
    cos, sin, tan = torch.cos(angle), torch.sin(angle), torch.tan(sh)
    # forward map: scale * rotation @ x-shear; grid_sample needs the inverse (output -> input coordinates)
    forward = torch.stack(
        [torch.stack([cos, cos * tan - sin], -1), torch.stack([sin, sin * tan + cos], -1)], -2
    ) * s.view(-1, 1, 1)
    theta = to_batch_device(torch.cat([torch.linalg.inv(forward), torch.zeros(n, 2, 1)], dim=2), x).to(x.dtype)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, align_corners=False, padding_mode="zeros")


def augment(x: torch.Tensor, names: tuple[str, ...], gen: torch.Generator) -> torch.Tensor:
    """Apply the named augmentations in order."""
    for name in names:
        x = AUGMENTATIONS[name](x, gen)
    return x
