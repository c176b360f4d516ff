"""The stitching layer and the stitched network g>j . T . f<=i."""

from __future__ import annotations

import torch
from torch import nn


class Stitcher(nn.Module):
    """Affine map M: R^c_in -> R^c_out applied at every position: a 1x1 convolution with bias for conv
    activations (N, C, H, W), a linear map applied to every token for transformer activations (N, T, D).

    Bilinear resizing (for i != j stitching across spatial sizes) is part of the cross-layer issue; here
    source and target sizes must agree.
    """

    def __init__(self, in_channels: int, out_channels: int, init: str = "random", tokens: bool = False) -> None:
        super().__init__()
        self.tokens = tokens
        if tokens:
            self.map: nn.Module = nn.Linear(in_channels, out_channels, bias=True)
        else:
            self.map = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=True)
        if init == "identity":
            if in_channels != out_channels:
                raise ValueError(
                    f"init: identity needs equal channel counts, found {in_channels} -> {out_channels}"
                )
            self.set_affine(torch.eye(in_channels), torch.zeros(in_channels))
        elif init != "random":
            raise ValueError(f"init: expected 'random' or 'identity', found {init!r}")

    @classmethod
    def for_shapes(cls, source: torch.Size, target: torch.Size, init: str = "random") -> "Stitcher":
        """A stitcher from a source activation shape to a target one (batch dimension first)."""
        if len(source) != len(target) or len(source) not in (3, 4):
            raise ValueError(f"cannot stitch activations of shape {tuple(source)} to {tuple(target)}: expected"
                             " (N, C, H, W) to (N, C, H, W) or (N, tokens, dim) to (N, tokens, dim)")
        tokens = len(source) == 3
        return cls(source[-1] if tokens else source[1], target[-1] if tokens else target[1], init, tokens)

    def set_affine(self, weight: torch.Tensor, bias: torch.Tensor) -> None:
        """Set the map to `a -> weight @ a + bias` at every position (weight: out x in)."""
        with torch.no_grad():
            self.map.weight.copy_(weight if self.tokens else weight.view(*weight.shape, 1, 1))
            self.map.bias.copy_(bias)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.map(a)


def positions(a: torch.Tensor) -> torch.Tensor:
    """Activations as rows, one per position the affine map acts on: (N, C, H, W) -> (N*H*W, C) and
    (N, T, D) -> (N*T, D)."""
    if a.dim() == 4:
        return a.permute(0, 2, 3, 1).reshape(-1, a.shape[1])
    if a.dim() == 3:
        return a.reshape(-1, a.shape[-1])
    raise ValueError(f"expected (N, C, H, W) or (N, tokens, dim) activations, found shape {tuple(a.shape)}")


class StitchedNet(nn.Module):
    def __init__(self, front: nn.Module, stitcher: Stitcher, end: nn.Module) -> None:
        super().__init__()
        self.front = front
        self.stitcher = stitcher
        self.end = end

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.end(self.stitcher(self.front(x)))
