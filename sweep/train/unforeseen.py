"""The JPEG, Gabor and Snow attacks of Kang et al. 2019 (Testing Robustness Against Unforeseen Adversaries),
the non-L_p threat models of Cianfarani et al. 2022 Section 6.

Each optimises its own variable by signed-gradient ascent on the cross-entropy (the variable moves by
`step_size` per step and is projected back onto its constraint), from a random start drawn from `generator`,
and returns images in [0, 1]. The budget `eps` means:

- `jpeg` (L-inf JPEG): the L-inf bound on a perturbation of the image's quantised JPEG coefficients
  (`sweep.train.jpeg`); the attacked image is the decoded, perturbed coefficients.
- `gabor`: the amplitude of additive Gabor noise on [0, 1] pixels (Kang et al.'s budgets are on 0..255: divide
  by 255). The noise is a sparse matrix convolved with a random sum of Gabor kernels (Co et al. 2019), pushed
  towards its extremes by the authors' variance normalisation and scaled to [0, 1]; the sparse matrix's nonzero
  entries, in [-1, 1], are the variable.
- `snow`: the weight of a layer of snowflakes (Kang et al.'s budgets carry over unchanged): a grid of flake
  intensities, raised to the 4th power and drawn with seven random blurred line kernels, added to the image
  after it is whitened towards a snowy sky; the intensities, in (0, 1], are the variable, and their mean over
  each 8 x 8 block of the grid is held at most 0.2 (the flake budget).

Departures from the authors' code (advex-uar), each deliberate: the JPEG perturbation is bounded by eps itself
(the code's `noisy_round` scales its variable by eps / 2); the Gabor variable is the sparse matrix's support
(the code's mask keeps the complement of the initial support, so its first step replaces the sparse start with
a dense matrix); Snow projects the flake budget onto its random start and after every step, the last included,
over partial 8 x 8 blocks too, and takes each gradient at the projected intensities (the code leaves the start,
the final step and grids under 8 x 8 unprojected, and takes its gradient before projecting); all randomness
comes from `generator`, so an attack is reproducible.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from sweep.train import jpeg

_ce = nn.CrossEntropyLoss()


def _ascend(model, y: torch.Tensor, variable: torch.Tensor, render, steps: int, step_size: float, project):
    """`steps` signed-gradient steps on the cross-entropy of `model(render(variable))`, each projected; returns
    the rendered images of the last variable."""
    for _ in range(steps):
        variable = variable.detach().requires_grad_(True)
        (grad,) = torch.autograd.grad(_ce(model(render(variable)), y), variable)
        with torch.no_grad():
            variable = project(variable + step_size * grad.sign())
    with torch.no_grad():
        return render(variable.detach()).detach()


def _uniform(shape, generator, like: torch.Tensor, low: float = -1.0, high: float = 1.0) -> torch.Tensor:
    """Uniform draws on [low, high] from the CPU `generator`, on `like`'s device and dtype."""
    return (torch.rand(shape, generator=generator, device="cpu") * (high - low) + low).to(like)


def jpeg_linf(model, x, y, eps, step_size, steps, random_start=True, generator=None) -> torch.Tensor:
    """L-inf JPEG attack: decode(encode(x) + delta), ||delta||_inf <= eps on the quantised coefficients."""
    x = x.detach()
    coefficients = jpeg.encode(x)
    shapes = [c.shape for c in coefficients.components]
    sizes = [math.prod(s) for s in shapes]
    start = _uniform((sum(sizes),), generator, x) * eps if random_start else x.new_zeros(sum(sizes))

    def render(flat: torch.Tensor) -> torch.Tensor:
        deltas = [d.view(s) for d, s in zip(flat.split(sizes), shapes)]
        return jpeg.decode(coefficients.plus(deltas))

    return _ascend(model, y, start, render, steps, step_size, lambda d: d.clamp(-eps, eps))


GABOR_KERNEL = 23  # the kernel side
GABOR_DENSITY = 1.0 / 14.0  # the sparse matrix's density


def gabor_kernel(size: int, sigma: float, frequency: float, theta: float, sides: int) -> torch.Tensor:
    """The sum of `sides` Gabor kernels on a size x size grid over [-0.5, 0.5]^2, rotated by theta + pi k /
    sides: each exp(-(u^2 + v^2) / 2 (sigma + 0.001)^2) cos(2 pi frequency u), u along the rotated axis."""
    grid = torch.linspace(-0.5, 0.5, size, dtype=torch.float64)
    yy, xx = torch.meshgrid(grid, grid, indexing="ij")
    out = torch.zeros(size, size, dtype=torch.float64)
    for k in range(sides):
        angle = theta + math.pi * k / sides
        u = xx * math.cos(angle) + yy * math.sin(angle)
        v = -xx * math.sin(angle) + yy * math.cos(angle)
        out += torch.exp(-0.5 * (u**2 + v**2) / (sigma + 1e-3) ** 2) * torch.cos(2 * math.pi * frequency * u)
    return out.float()


def variance_normalise(z: torch.Tensor, floor: float = 1e-3) -> torch.Tensor:
    """The authors' normalisation of procedural noise, per image of (B, 1, H, W): with m the image's mean and
    a = |z - m| / max |z - m|, m + (z - m) (1 + floor) / (floor + a), then min-max scaled to [0, 1]. (Their code
    computes |z - m| as the square root of an FFT's inverse FFT of (z - m)^2; the two agree.)"""
    m = z.mean(dim=(1, 2, 3), keepdim=True).detach()  # the mean and the factor are constants, as theirs
    a = (z - m).abs()
    a = a / a.amax(dim=(1, 2, 3), keepdim=True).clamp_min(1e-12)
    out = m + (z - m) * ((1 + floor) / (floor + a)).detach()
    lo, hi = out.amin(dim=(1, 2, 3), keepdim=True).detach(), out.amax(dim=(1, 2, 3), keepdim=True).detach()
    return (out - lo) / (hi - lo).clamp_min(1e-12)


def _gabor_kernels(n: int, generator) -> torch.Tensor:
    """One random Gabor kernel per image: sides in 1..10, sigma in [0.1, 0.4], frequency in [3, size / 4],
    theta in [0, pi] (Kang et al.'s ranges)."""
    r = torch.rand(n, 4, generator=generator).tolist()
    sides = torch.randint(1, 11, (n,), generator=generator).tolist()
    top = GABOR_KERNEL / 4.0
    return torch.stack(
        [
            gabor_kernel(GABOR_KERNEL, 0.1 + 0.3 * a, 3 + (top - 3) * b, math.pi * c, s)
            for (a, b, c, _), s in zip(r, sides)
        ]
    ).unsqueeze(1)


def gabor(model, x, y, eps, step_size, steps, random_start=True, generator=None) -> torch.Tensor:
    """Gabor attack: clamp(x + eps * N(M * g), 0, 1) with M sparse (its support fixed, values in [-1, 1])."""
    x = x.detach()
    n, _, h, w = x.shape
    kernels = _gabor_kernels(n, generator).to(x)
    support = (torch.rand((n, 1, h, w), generator=generator) < GABOR_DENSITY).to(x)
    start = (_uniform((n, 1, h, w), generator, x) if random_start else torch.zeros_like(support)) * support

    def render(m: torch.Tensor) -> torch.Tensor:
        noise = F.conv2d(m.view(1, n, h, w), kernels, padding=GABOR_KERNEL // 2, groups=n).view(n, 1, h, w)
        return (x + eps * variance_normalise(noise)).clamp(0.0, 1.0)

    return _ascend(model, y, start, render, steps, step_size, lambda m: m.clamp(-1.0, 1.0) * support)


SNOW_KERNEL = 13  # a flake kernel's side
SNOW_FLAKE_BUDGET = 0.2  # the most a block of flake intensities may average
SNOW_DISCOLOUR = 0.25  # how far the image is whitened towards a snowy sky


def flake_kernel(generator, flip: bool) -> torch.Tensor:
    """One flake: a line through the kernel's centre to a random end point in the lower right quadrant and its
    mirror image through the centre, width 1, 3 or 5 (probabilities 0.6, 0.3, 0.1), anti-aliased as Kang et
    al. draw it (along the line's major axis, a pixel at minor-axis distance t from the line gets
    clip(1 + width sqrt(1 + |slope|) / 4 - t, 0, 1)); mirrored horizontally when `flip`; blurred by a 3 x 3
    Gaussian with sigma in [0.41, 0.6]. (SNOW_KERNEL, SNOW_KERNEL)."""
    size, mid = SNOW_KERNEL, SNOW_KERNEL // 2
    end = torch.randint(mid + 2, size, (2,), generator=generator).tolist()
    u = float(torch.rand(1, generator=generator))
    width = 1 if u < 0.6 else 3 if u < 0.9 else 5
    rows, cols = torch.meshgrid(torch.arange(size).double() - mid, torch.arange(size).double() - mid, indexing="ij")
    d_row, d_col = end[0] - mid, end[1] - mid
    major, minor, d_major, d_minor = (cols, rows, d_col, d_row) if d_col >= d_row else (rows, cols, d_row, d_col)
    slope = d_minor / d_major
    along = major.abs() <= d_major  # the segment from -end to +end through the centre
    line = (1.0 + width * math.sqrt(1 + abs(slope)) / 4.0 - (minor - slope * major).abs()).clamp(0.0, 1.0) * along
    if flip:
        line = line.flip(1)
    sigma = 0.41 + 0.19 * float(torch.rand(1, generator=generator))
    g = torch.exp(-((torch.arange(3).double() - 1) ** 2) / (2 * sigma**2))
    blur = (g[:, None] * g[None, :]) / (g.sum() ** 2)
    return F.conv2d(line.view(1, 1, size, size), blur.view(1, 1, 3, 3), padding=1)[0, 0].float()


def snow_layer(intensities: torch.Tensor, kernels: torch.Tensor) -> torch.Tensor:
    """(B, 7, H/4, W/4) flake intensities -> (B, 1, H, W) snow: intensity^4 on a grid of every 4th pixel (the
    first four kernels on rows 0 mod 4 and columns i mod 4, the last three on rows i + 1 mod 4, columns 0
    mod 4), each drawn with its kernel."""
    n, _, gh, gw = intensities.shape
    grid = intensities.new_zeros(n, 7, gh * 4, gw * 4)
    power = intensities**4
    for i in range(4):
        grid[:, i, ::4, i::4] = power[:, i]
    for i in range(3):
        grid[:, 4 + i, i + 1 :: 4, ::4] = power[:, 4 + i]
    return F.conv2d(grid, kernels.unsqueeze(0), padding=SNOW_KERNEL // 2)


def flake_budget(intensities: torch.Tensor, block: int = 8) -> torch.Tensor:
    """Clamp to [1e-9, 1], then scale each block x block patch of each channel down to a mean of at most
    SNOW_FLAKE_BUDGET (patches at the grid's edge may be partial)."""
    out = intensities.clamp(1e-9, 1.0)
    h, w = out.shape[-2:]
    for i in range(0, h, block):
        for j in range(0, w, block):
            patch = out[:, :, i : i + block, j : j + block]
            mean = patch.mean(dim=(2, 3), keepdim=True)
            out[:, :, i : i + block, j : j + block] = patch * (SNOW_FLAKE_BUDGET / mean.clamp_min(SNOW_FLAKE_BUDGET))
    return out


def discolour(x: torch.Tensor) -> torch.Tensor:
    """The image whitened towards a snowy sky: 0.75 x + 0.25 max(x, 1.5 luminance + 0.5)."""
    lum = x if x.shape[1] == 1 else (0.2126 * x[:, 0:1] + 0.7152 * x[:, 1:2] + 0.0722 * x[:, 2:3])
    return (1 - SNOW_DISCOLOUR) * x + SNOW_DISCOLOUR * torch.max(x, 1.5 * lum + 0.5)


def snow(model, x, y, eps, step_size, steps, random_start=True, generator=None) -> torch.Tensor:
    """Snow attack: clamp(discolour(x) + eps * snow_layer(intensities), 0, 1)."""
    x = x.detach()
    n, _, h, w = x.shape
    if h % 4 or w % 4:
        raise ValueError(f"snow: image sides must be multiples of 4 (the flake grid), found {h} x {w}")
    flip = bool(torch.rand(1, generator=generator) < 0.5)
    kernels = torch.stack([flake_kernel(generator, flip) for _ in range(7)]).to(x)
    u = torch.rand((n, 7, h // 4, w // 4), generator=generator) if random_start else torch.zeros(n, 7, h // 4, w // 4)
    start = flake_budget(torch.exp(-u / SNOW_FLAKE_BUDGET)).to(x)
    base = discolour(x)

    def render(intensities: torch.Tensor) -> torch.Tensor:
        return (base + eps * snow_layer(intensities, kernels)).clamp(0.0, 1.0)

    return _ascend(model, y, start, render, steps, step_size, flake_budget)
