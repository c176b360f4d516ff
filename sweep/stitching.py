"""The stitching layer and the stitched network g>j . T . f<=i."""

from __future__ import annotations

import torch
from torch import nn


class Stitcher(nn.Module):
    """Affine map on channels applied at every spatial position: a 1x1 convolution with bias.

    Bilinear resizing (for i != j stitching across spatial sizes) is part of the cross-layer issue; here
    source and target sizes must agree.
    """

    def __init__(self, in_channels: int, out_channels: int, init: str = "random") -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=True)
        if init == "identity":
            if in_channels != out_channels:
                raise ValueError(
                    f"init: identity needs equal channel counts, found {in_channels} -> {out_channels}"
                )
            with torch.no_grad():
                self.conv.weight.copy_(torch.eye(in_channels).view(in_channels, in_channels, 1, 1))
                self.conv.bias.zero_()
        elif init != "random":
            raise ValueError(f"init: expected 'random' or 'identity', found {init!r}")

    def set_affine(self, weight: torch.Tensor, bias: torch.Tensor) -> None:
        """Set the map to `x -> weight @ x + bias` per position (weight: out x in)."""
        with torch.no_grad():
            self.conv.weight.copy_(weight.view(*weight.shape, 1, 1))
            self.conv.bias.copy_(bias)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.conv(a)


class StitchedNet(nn.Module):
    def __init__(self, front: nn.Module, stitcher: Stitcher, end: nn.Module) -> None:
        super().__init__()
        self.front = front
        self.stitcher = stitcher
        self.end = end

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.end(self.stitcher(self.front(x)))
