"""A differentiable JPEG codec without rounding: the space the L-inf JPEG attack perturbs (Kang et al. 2019,
Testing Robustness Against Unforeseen Adversaries).

`encode` takes images in [0, 1] (1 or 3 channels) to JPEG's quantised DCT coefficients: pixels on 0..255,
RGB -> YCbCr (JFIF), chroma averaged over 2 x 2 pixels (4:2:0), 8 x 8 blocks shifted by -128, the orthonormal
2-D DCT-II, divided by the quality-50 quantisation tables (luma for Y, chroma for Cb and Cr). Nothing is
rounded, so the codec is differentiable and `decode(encode(x))` returns x up to the chroma subsampling (exactly
x for a grey image). Images whose side is not a multiple of the block (16 with chroma, 8 without) are padded by
replicating their last row and column, and cropped back after decoding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.nn import functional as F

# The quality-50 quantisation tables of the JPEG standard (ITU-T T.81 Annex K), indexed [row][column].
LUMA_TABLE = (
    (16, 11, 10, 16, 24, 40, 51, 61),
    (12, 12, 14, 19, 26, 58, 60, 55),
    (14, 13, 16, 24, 40, 57, 69, 56),
    (14, 17, 22, 29, 51, 87, 80, 62),
    (18, 22, 37, 56, 68, 109, 103, 77),
    (24, 35, 55, 64, 81, 104, 113, 92),
    (49, 64, 78, 87, 103, 121, 120, 101),
    (72, 92, 95, 98, 112, 100, 103, 99),
)
CHROMA_TABLE = (
    (17, 18, 24, 47, 99, 99, 99, 99),
    (18, 21, 26, 66, 99, 99, 99, 99),
    (24, 26, 56, 99, 99, 99, 99, 99),
    (47, 66, 99, 99, 99, 99, 99, 99),
) + ((99,) * 8,) * 4
_TO_YCBCR = ((0.299, 0.587, 0.114), (-0.168736, -0.331264, 0.5), (0.5, -0.418688, -0.081312))
_TO_RGB = ((1.0, 0.0, 1.402), (1.0, -0.344136, -0.714136), (1.0, 1.772, 0.0))


def dct_matrix(n: int = 8, dtype=torch.float32) -> torch.Tensor:
    """The orthonormal DCT-II matrix C (C @ C.T = I): C[u, x] = a(u) cos((2x + 1) u pi / 2n)."""
    u = torch.arange(n, dtype=torch.float64).view(-1, 1)
    x = torch.arange(n, dtype=torch.float64).view(1, -1)
    c = torch.cos((2 * x + 1) * u * math.pi / (2 * n)) * math.sqrt(2.0 / n)
    c[0] /= math.sqrt(2.0)
    return c.to(dtype)


@dataclass
class Coefficients:
    """The quantised DCT coefficients of a batch: one (batch, rows, cols, 8, 8) tensor per component (Y, and Cb
    and Cr for colour images), and the image size they decode to."""

    components: list[torch.Tensor]
    height: int
    width: int

    def plus(self, deltas: list[torch.Tensor]) -> Coefficients:
        return Coefficients([c + d for c, d in zip(self.components, deltas)], self.height, self.width)


def _blocks(plane: torch.Tensor) -> torch.Tensor:
    """(B, H, W) -> (B, H/8, W/8, 8, 8)."""
    b, h, w = plane.shape
    return plane.reshape(b, h // 8, 8, w // 8, 8).permute(0, 1, 3, 2, 4)


def _unblock(blocks: torch.Tensor) -> torch.Tensor:
    b, rows, cols = blocks.shape[:3]
    return blocks.permute(0, 1, 3, 2, 4).reshape(b, rows * 8, cols * 8)


def _mix(planes: torch.Tensor, matrix, shift: torch.Tensor) -> torch.Tensor:
    """A per-pixel colour transform of (B, 3, H, W): out[c] = sum_k matrix[c][k] * planes[k] + shift[c]."""
    m = torch.tensor(matrix, dtype=planes.dtype, device=planes.device)
    return torch.einsum("ck,bkhw->bchw", m, planes) + shift.view(1, 3, 1, 1)


def encode(x: torch.Tensor) -> Coefficients:
    """Images in [0, 1], (B, C, H, W) with C in (1, 3), to their quantised DCT coefficients."""
    if x.dim() != 4 or x.shape[1] not in (1, 3):
        raise ValueError(f"JPEG: expected images of shape (batch, 1 or 3, height, width), found {tuple(x.shape)}")
    height, width = x.shape[-2:]
    colour = x.shape[1] == 3
    side = 16 if colour else 8
    pad_h, pad_w = (-height) % side, (-width) % side
    v = F.pad(x * 255.0, (0, pad_w, 0, pad_h), mode="replicate") if pad_h or pad_w else x * 255.0
    c = dct_matrix(dtype=x.dtype).to(x.device)
    if colour:
        ycc = _mix(v, _TO_YCBCR, torch.tensor([0.0, 128.0, 128.0], dtype=x.dtype, device=x.device))
        planes = [ycc[:, 0], F.avg_pool2d(ycc[:, 1:2], 2)[:, 0], F.avg_pool2d(ycc[:, 2:3], 2)[:, 0]]
    else:
        planes = [v[:, 0]]
    out = []
    for k, plane in enumerate(planes):
        table = torch.tensor(LUMA_TABLE if k == 0 else CHROMA_TABLE, dtype=x.dtype, device=x.device)
        out.append(c @ (_blocks(plane) - 128.0) @ c.T / table)
    return Coefficients(out, height, width)


def decode(coefficients: Coefficients) -> torch.Tensor:
    """Quantised DCT coefficients back to images in [0, 1] (clamped, as a decoder writes bytes)."""
    comps = coefficients.components
    c = dct_matrix(dtype=comps[0].dtype).to(comps[0].device)
    planes = []
    for k, comp in enumerate(comps):
        table = torch.tensor(LUMA_TABLE if k == 0 else CHROMA_TABLE, dtype=comp.dtype, device=comp.device)
        planes.append(_unblock(c.T @ (comp * table) @ c + 128.0))
    if len(planes) == 3:
        chroma = [p.repeat_interleave(2, dim=1).repeat_interleave(2, dim=2) for p in planes[1:]]
        ycc = torch.stack([planes[0], *chroma], dim=1)
        shift = torch.tensor([0.0, -128.0, -128.0], dtype=ycc.dtype, device=ycc.device)
        rgb = _mix(ycc + shift.view(1, 3, 1, 1), _TO_RGB, torch.zeros(3, dtype=ycc.dtype, device=ycc.device))
    else:
        rgb = planes[0].unsqueeze(1)
    return (rgb[:, :, : coefficients.height, : coefficients.width] / 255.0).clamp(0.0, 1.0)
