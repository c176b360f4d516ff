"""The colour-digit datasets of Smith & Marcu 2024 (Comparing Apples and Oranges: is Stitching Similarity a Load
of Spheres?, Appendix A), built from any registered 1-channel 28 x 28 dataset (the base).

Every variant is 3 x 28 x 28. The shape variants snap every non-zero base pixel to white and paint the rest of
the image (the background) a flat colour: one of the ten colours of Bahng et al. 2020's colour-MNIST
(`COLOUR_MAP`), each channel moved by 10% of 255 times a standard normal draw clipped to [-1, 1], per image
(the same procedure for the test set):

- `<base>_correlated` (the paper's Correlated): background colour = the label's colour; label = the base label.
- `<base>_digit` (Digit): background colour uniformly random; label = the base label.
- `<base>_colour` (Colour): background colour uniformly random; label = the colour (the digit is random with
  respect to it).
- `<base>_colour_only` (Colour-only): no digit, the whole image the label's colour; label = the base label
  (so the classes are as balanced as the base's).
- `<base>_rgb`: the base images repeated over three channels, grey values kept (the paper's 3-channel MNIST).

The random draws come from a generator seeded with `COLOUR_SEED` and the split (train, test): part of the
dataset's definition, so a dataset name always means the same images.
"""

from __future__ import annotations

from pathlib import Path

import torch

from sweep.data.core import Pool, read_pool
from sweep.data.declared import COLOUR_MAP
from sweep.data.declared import COLOUR_VARIANTS as VARIANTS

COLOUR_NOISE = 0.1  # the background colour's per-image variation, a fraction of the channel range
COLOUR_SEED = 0


def colourise(x: torch.Tensor, y: torch.Tensor, variant: str, generator: torch.Generator) -> tuple:
    """(images, labels) of `variant` from base images x (N, 1, 28, 28) in [0, 1] and labels y."""
    if variant not in VARIANTS:
        raise ValueError(f"colour-digit variant: expected one of {VARIANTS}, found {variant!r}")
    if variant == "rgb":
        return x.expand(-1, 3, -1, -1).clone(), y.clone()
    n = len(y)
    random_colour = torch.randint(0, len(COLOUR_MAP), (n,), generator=generator)
    colour_index = random_colour if variant in ("digit", "colour") else y
    label = random_colour if variant == "colour" else y
    base = torch.tensor(COLOUR_MAP, dtype=torch.float32)[colour_index] / 255.0
    jitter = COLOUR_NOISE * torch.randn(n, 3, generator=generator).clamp(-1.0, 1.0)
    background = (base + jitter).clamp(0.0, 1.0).view(n, 3, 1, 1)
    digit = (x > 0).expand(-1, 3, -1, -1) if variant != "colour_only" else torch.zeros(n, 3, *x.shape[-2:], dtype=bool)
    images = torch.where(digit, torch.ones(()), background.expand(-1, -1, *x.shape[-2:]))
    return images.contiguous(), label.clone()


def colour_pool(base: str, variant: str, root: Path, download: bool) -> Pool:
    pool = read_pool(base, str(root), download)  # built from it, then let go: the colour pool is what is kept
    splits = []
    for k, (x, y) in enumerate(((pool.train_x, pool.train_y), (pool.test_x, pool.test_y))):
        splits.append(colourise(x, y, variant, torch.Generator().manual_seed(COLOUR_SEED * 2 + k)))
    (train_x, train_y), (test_x, test_y) = splits
    return Pool(train_x, train_y, test_x, test_y, pool.num_classes, (0.5,) * 3, (0.5,) * 3)
