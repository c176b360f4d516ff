"""The stitching layer and the stitched network g>j . T . f<=i."""

from __future__ import annotations

import torch
from torch import nn

from sweep.registry import STITCHERS


class _TokenBatchNorm(nn.BatchNorm1d):
    """BatchNorm over the feature dimension of (N, tokens, dim) activations (statistics over N and tokens)."""

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return super().forward(a.transpose(1, 2)).transpose(1, 2)


class Stitcher(nn.Module):
    """Affine map M: R^c_in -> R^c_out applied at every position: a 1x1 convolution with bias for conv
    activations (N, C, H, W), a linear map applied to every token for transformer activations (N, T, D), a
    linear map for vectors (N, D) (the pooled features before a classifier: `vector=True`).

    `kind="bn_affine_bn"` is Bansal et al.'s variant (used by Smith & Marcu 2024): BatchNorm -> affine map -> BatchNorm.
    Its BatchNorms start as the identity up to BatchNorm's eps (running mean 0, variance 1, weight 1, bias 0).

    When source and target feature maps differ in height and width (stitching layer i to layer j != i, or
    across architectures), every source feature map is first resized bilinearly to the target's size (seed
    004 Section 2.1); `size` is that target size (None: no resizing). Token activations must agree in count.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        init: str = "random",
        tokens: bool = False,
        kind: str = "affine",
        size: tuple[int, int] | None = None,
        vector: bool = False,
    ) -> None:
        super().__init__()
        self.vector = vector
        tokens = tokens or vector  # a vector is one token: the same linear map
        self.size = tuple(size) if size is not None else None
        if kind not in STITCHERS:
            raise ValueError(f"stitcher: expected one of {sorted(STITCHERS)}, found {kind!r}")
        self.tokens = tokens
        self.kind = kind
        if tokens:
            self.map: nn.Module = nn.Linear(in_channels, out_channels, bias=True)
        else:
            self.map = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=True)
        bn = nn.BatchNorm1d if vector else _TokenBatchNorm if tokens else nn.BatchNorm2d
        self.bn_in: nn.Module = bn(in_channels) if kind == "bn_affine_bn" else nn.Identity()
        self.bn_out: nn.Module = bn(out_channels) if kind == "bn_affine_bn" else nn.Identity()
        if init == "identity":  # exact for `affine`; BatchNorms at their initial statistics divide by
            if in_channels != out_channels:  # sqrt(1 + eps) each
                raise ValueError(f"init: identity needs equal channel counts, found {in_channels} -> {out_channels}")
            self.set_affine(torch.eye(in_channels), torch.zeros(in_channels))
        elif init not in ("random", "dm"):  # "dm": random here, then solved by direct matching
            raise ValueError(f"init: expected 'random', 'identity' or 'dm', found {init!r}")

    @property
    def channels(self) -> tuple[int, int]:
        return self.map.in_features if self.tokens else self.map.in_channels, (
            self.map.out_features if self.tokens else self.map.out_channels
        )

    @classmethod
    def for_shapes(cls, source: torch.Size, target: torch.Size, init: str = "random", kind: str = "affine") -> Stitcher:
        """A stitcher from a source activation shape to a target one (batch dimension first)."""
        if len(source) != len(target) or len(source) not in (2, 3, 4):
            raise ValueError(
                f"cannot stitch activations of shape {tuple(source)} to {tuple(target)}: expected"
                " (N, C, H, W) to (N, C, H, W), (N, tokens, dim) to (N, tokens, dim) or (N, D) to (N, D)"
            )
        if len(source) == 2:
            return cls(source[1], target[1], init, kind=kind, vector=True)
        tokens = len(source) == 3
        if tokens and source[1] != target[1]:
            raise ValueError(f"cannot stitch {source[1]} tokens to {target[1]}: token counts must agree")
        size = None if tokens or tuple(source[2:]) == tuple(target[2:]) else tuple(target[2:])
        return cls(source[-1] if tokens else source[1], target[-1] if tokens else target[1], init, tokens, kind, size)

    def set_affine(self, weight: torch.Tensor, bias: torch.Tensor) -> None:
        """Set the map to `a -> weight @ a + bias` at every position (weight: out x in)."""
        with torch.no_grad():
            self.map.weight.copy_(weight if self.tokens else weight.view(*weight.shape, 1, 1))
            self.map.bias.copy_(bias)

    def set_normalisation(
        self, source_mean: torch.Tensor, source_var: torch.Tensor, target_mean: torch.Tensor, target_var: torch.Tensor
    ) -> None:
        """For `bn_affine_bn`: make the input BatchNorm standardise with the source statistics and the output
        BatchNorm map standardised values back to the target's mean and variance, so that the affine map in
        between works in standardised coordinates (direct-matching init)."""
        if self.kind != "bn_affine_bn":
            raise ValueError("set_normalisation applies to the bn_affine_bn stitcher only")
        with torch.no_grad():
            self.bn_in.running_mean.copy_(source_mean)
            self.bn_in.running_var.copy_(source_var)
            self.bn_out.running_mean.zero_()
            self.bn_out.running_var.fill_(1.0)
            self.bn_out.weight.copy_(target_var.sqrt())
            self.bn_out.bias.copy_(target_mean)

    def resize(self, a: torch.Tensor) -> torch.Tensor:
        """Source activations at the target's spatial size (bilinear; identity when sizes agree)."""
        if self.size is None or tuple(a.shape[-2:]) == self.size:
            return a
        return nn.functional.interpolate(a, size=self.size, mode="bilinear", align_corners=False)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.bn_out(self.map(self.bn_in(self.resize(a))))


def positions(a: torch.Tensor) -> torch.Tensor:
    """Activations as rows, one per position the affine map acts on: (N, C, H, W) -> (N*H*W, C),
    (N, T, D) -> (N*T, D), and vectors (N, D) as they are."""
    if a.dim() == 4:
        return a.permute(0, 2, 3, 1).reshape(-1, a.shape[1])
    if a.dim() in (2, 3):
        return a.reshape(-1, a.shape[-1])
    raise ValueError(f"expected (N, C, H, W), (N, tokens, dim) or (N, D) activations, found shape {tuple(a.shape)}")


class StitchedNet(nn.Module):
    def __init__(self, front: nn.Module, stitcher: Stitcher, end: nn.Module) -> None:
        super().__init__()
        self.front = front
        self.stitcher = stitcher
        self.end = end

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.end(self.stitcher(self.front(x)))
