"""Vision transformers (ViT-Ti/4 for 32 px, ViT-Ti/16 for 224 px, a CPU-sized ViT); the stitch points are the
token sequences (N, tokens, dim) after each encoder block, as in Balogh & Jelasity 2025. ViT-Ti/16 is timm's
`vit_tiny_patch16_224` (DeiT-Ti's layout): its checkpoints load as `file:` donors (`external.py`)."""

from __future__ import annotations

import torch
from torch import nn

from sweep.models.base import Normalize, PooledHead, StagedNet, builtin


class PatchEmbed(nn.Module):
    """Normalise, cut into patches, prepend the class token, add position embeddings: (N, 1 + P, dim)."""

    def __init__(self, in_channels, dim, patch, image_size, mean, std) -> None:
        super().__init__()
        self.normalize = Normalize(mean, std)
        self.proj = nn.Conv2d(in_channels, dim, patch, patch)
        n_patches = (image_size // patch) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, 1 + n_patches, dim) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.proj(self.normalize(x)).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(len(x), -1, -1), x], dim=1)
        return x + self.pos_embed


class EncoderBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: int = 4, eps: float = 1e-5) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class TokenHead(PooledHead):
    def __init__(self, dim: int, num_classes: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=eps)
        self.fc = nn.Linear(dim, num_classes)

    def pooled(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)[:, 0]


def _vit(*, in_channels, num_classes, mean, std, image_size, dim, depth, heads, patch, eps=1e-5) -> StagedNet:
    if image_size % patch:
        raise ValueError(f"image size {image_size} is not a multiple of the patch size {patch}")
    stages: list[tuple[str, nn.Module]] = [("embed", PatchEmbed(in_channels, dim, patch, image_size, mean, std))]
    points = []
    for b in range(depth):
        stages.append((f"blocks.{b}", EncoderBlock(dim, heads, eps=eps)))
        points.append(f"blocks.{b}")
    stages.append(("head", TokenHead(dim, num_classes, eps=eps)))
    return StagedNet(stages, points)


# name: dim, blocks, heads, patch, LayerNorm eps (descriptions in `declared.py`)
VARIANTS = {
    "vit_ti": (192, 12, 3, 4, 1e-5),
    "vit_ti_16": (192, 12, 3, 16, 1e-6),  # timm's LayerNorms
    "vit_tiny_cpu": (32, 4, 2, 4, 1e-5),
}
TIMM_VITS = {"vit_ti_16"}  # the variants whose timm checkpoints load (`external.py`): timm's eps and patches


def _register(name: str, dim: int, depth: int, heads: int, patch: int, eps: float) -> None:
    @builtin(name)
    def builder(*, in_channels, num_classes, mean, std, image_size=32) -> StagedNet:
        return _vit(
            in_channels=in_channels, num_classes=num_classes, mean=mean, std=std, image_size=image_size,
            dim=dim, depth=depth, heads=heads, patch=patch, eps=eps,
        )  # fmt: skip


for _name, _variant in VARIANTS.items():
    _register(_name, *_variant)
