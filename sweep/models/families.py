"""The registered architectures and where each may be stitched.

Placement follows seed 000 A.5.1: residual nets are cut after each residual block, after the addition.
For ResNet and VGG the cut is *before* the activation that follows (so that activation runs at the start
of the next stage); pre-activation nets (PreActResNet, WideResNet) have no activation after their addition,
so their block output, the residual stream, is the representation (seed 000 says "after the activation"
for them: the stitch sees the same stream that the next block's BN-ReLU and skip connection both read).
ViT stitch points are the token sequences (N, tokens, dim) after each encoder block (seed 004).
"""

from __future__ import annotations

import torch
from torch import nn

from sweep.models.base import Normalize, StagedNet, register_architecture

# ----------------------------------------------------------------------------------------------- ResNets


class BasicBlock(nn.Module):
    """ResNet basic block taking the *pre-activation* output of the previous stage.

    The ReLU a textbook block applies after its addition is applied here to the input instead, so the
    block's output is the sum before activation: the place where seed 000 puts its stitching layers.
    """

    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = _projection(in_planes, planes, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(x)
        out = torch.relu(self.bn1(self.conv1(x)))
        return self.bn2(self.conv2(out)) + self.shortcut(x)


class Bottleneck(nn.Module):
    """ResNet-50 bottleneck block, same pre-activation-output convention as `BasicBlock`."""

    expansion = 4

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        out = planes * self.expansion
        self.conv1 = nn.Conv2d(in_planes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.shortcut = _projection(in_planes, out, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(x)
        out = torch.relu(self.bn1(self.conv1(x)))
        out = torch.relu(self.bn2(self.conv2(out)))
        return self.bn3(self.conv3(out)) + self.shortcut(x)


def _projection(in_planes: int, out_planes: int, stride: int) -> nn.Module:
    if stride == 1 and in_planes == out_planes:
        return nn.Identity()
    return nn.Sequential(nn.Conv2d(in_planes, out_planes, 1, stride, bias=False), nn.BatchNorm2d(out_planes))


class Head(nn.Module):
    """Optional BN, then ReLU, global average pooling and the linear classifier."""

    def __init__(self, planes: int, num_classes: int, bn: bool = False) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(planes) if bn else nn.Identity()
        self.fc = nn.Linear(planes, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def _residual_net(
    block, widths, blocks, *, in_channels, num_classes, mean, std, stem_stride=1, stem_bn=True, head_bn=False
) -> StagedNet:
    in_planes = widths[0]
    stem: list[nn.Module] = [Normalize(mean, std), nn.Conv2d(in_channels, in_planes, 3, stem_stride, 1, bias=False)]
    if stem_bn:
        stem.append(nn.BatchNorm2d(in_planes))
    stages: list[tuple[str, nn.Module]] = [("stem", nn.Sequential(*stem))]
    points = []
    for i, (planes, n) in enumerate(zip(widths, blocks), start=1):
        for b in range(n):
            stride = 2 if (b == 0 and i > 1) else 1
            name = f"layer{i}.{b}"
            stages.append((name, block(in_planes, planes, stride)))
            points.append(name)
            in_planes = planes * block.expansion
    stages.append(("head", Head(in_planes, num_classes, bn=head_bn)))
    return StagedNet(stages, points)


@register_architecture(
    "resnet_tiny", "CPU-sized residual net: stride-2 stem, widths 8/16/32, 2 blocks per stage (6 points)"
)
def resnet_tiny(*, in_channels, num_classes, mean, std, image_size=32) -> StagedNet:
    # The stride-2 stem quarters the cost of the first stage: what makes PGD training fit a 2-core budget.
    return _residual_net(
        BasicBlock,
        [8, 16, 32],
        [2, 2, 2],
        in_channels=in_channels,
        num_classes=num_classes,
        mean=mean,
        std=std,
        stem_stride=2,
    )


@register_architecture("resnet18", "CIFAR-style ResNet-18 of the papers: 3x3 stem, no max-pool (8 points)")
def resnet18(*, in_channels, num_classes, mean, std, image_size=32) -> StagedNet:
    return _residual_net(
        BasicBlock,
        [64, 128, 256, 512],
        [2, 2, 2, 2],
        in_channels=in_channels,
        num_classes=num_classes,
        mean=mean,
        std=std,
    )


@register_architecture("resnet50", "CIFAR-style ResNet-50: bottleneck blocks 3/4/6/3 (16 points)")
def resnet50(*, in_channels, num_classes, mean, std, image_size=32) -> StagedNet:
    return _residual_net(
        Bottleneck,
        [64, 128, 256, 512],
        [3, 4, 6, 3],
        in_channels=in_channels,
        num_classes=num_classes,
        mean=mean,
        std=std,
    )


# ----------------------------------------------------------------------------- pre-activation ResNets


class PreActBlock(nn.Module):
    """Pre-activation block (He et al. 2016b; also WideResNet's block without dropout)."""

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.shortcut = None
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Conv2d(in_planes, planes, 1, stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(x))
        skip = x if self.shortcut is None else self.shortcut(out)
        out = self.conv2(torch.relu(self.bn2(self.conv1(out))))
        return out + skip


def _preact_net(
    widths, blocks, *, in_channels, num_classes, mean, std, stem_width, block=PreActBlock, head=None
) -> StagedNet:
    """Stem conv, pre-activation blocks named layer<group>.<block>, BN-activation head. `block(in, out,
    stride)` builds a block; `head(planes, classes)` the head (default: BN, ReLU, pool, linear)."""
    stages: list[tuple[str, nn.Module]] = [
        ("stem", nn.Sequential(Normalize(mean, std), nn.Conv2d(in_channels, stem_width, 3, 1, 1, bias=False)))
    ]
    points, in_planes = [], stem_width
    for i, (planes, n) in enumerate(zip(widths, blocks), start=1):
        for b in range(n):
            name = f"layer{i}.{b}"
            stages.append((name, block(in_planes, planes, 2 if (b == 0 and i > 1) else 1)))
            points.append(name)
            in_planes = planes
    head = head or (lambda planes, classes: Head(planes, classes, bn=True))
    stages.append(("head", head(in_planes, num_classes)))
    return StagedNet(stages, points)


@register_architecture("preact_resnet18", "PreActResNet-18 (He et al. 2016b), CIFAR-style (8 points)")
def preact_resnet18(*, in_channels, num_classes, mean, std, image_size=32) -> StagedNet:
    return _preact_net(
        [64, 128, 256, 512],
        [2, 2, 2, 2],
        in_channels=in_channels,
        num_classes=num_classes,
        mean=mean,
        std=std,
        stem_width=64,
    )


@register_architecture("wrn28_10", "WideResNet-28-10 (Zagoruyko & Komodakis), 3 groups of 4 blocks (12 points)")
def wrn28_10(*, in_channels, num_classes, mean, std, image_size=32) -> StagedNet:
    return _preact_net(
        [160, 320, 640], [4, 4, 4], in_channels=in_channels, num_classes=num_classes, mean=mean, std=std, stem_width=16
    )


# ------------------------------------------------------------------------------------------------- VGG

VGG11 = [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]


class VGGStage(nn.Module):
    """ReLU of the previous conv (if any), max-pool (if the config has one here), conv, BN."""

    def __init__(self, in_planes: int, planes: int, relu_first: bool, pool_first: bool) -> None:
        super().__init__()
        self.relu_first, self.pool_first = relu_first, pool_first
        self.conv = nn.Conv2d(in_planes, planes, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(planes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.relu_first:
            x = torch.relu(x)
        if self.pool_first:  # ceil_mode: 28x28 inputs pool down to 1x1 as 32x32 ones do
            x = nn.functional.max_pool2d(x, 2, ceil_mode=True)
        return self.bn(self.conv(x))


class VGGHead(nn.Module):
    def __init__(self, planes: int, num_classes: int) -> None:
        super().__init__()
        self.fc = nn.Linear(planes, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.max_pool2d(torch.relu(x), 2, ceil_mode=True)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


@register_architecture("vgg11", "VGG-11 with BatchNorm, CIFAR-style; stitch points after each conv+BN (8)")
def vgg11(*, in_channels, num_classes, mean, std, image_size=32) -> StagedNet:
    stages: list[tuple[str, nn.Module]] = [("input", Normalize(mean, std))]
    points, in_planes, pool, k = [], in_channels, False, 0
    for item in VGG11[:-1]:  # the last max-pool belongs to the head
        if item == "M":
            pool = True
            continue
        k += 1
        stages.append((f"conv{k}", VGGStage(in_planes, int(item), relu_first=k > 1, pool_first=pool)))
        points.append(f"conv{k}")
        in_planes, pool = int(item), False
    stages.append(("head", VGGHead(in_planes, num_classes)))
    return StagedNet(stages, points)


# ------------------------------------------------------------------------------------------------- ViT


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
    def __init__(self, dim: int, heads: int, mlp_ratio: int = 4) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class TokenHead(nn.Module):
    def __init__(self, dim: int, num_classes: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.norm(x)[:, 0])


def _vit(*, in_channels, num_classes, mean, std, image_size, dim, depth, heads, patch) -> StagedNet:
    if image_size % patch:
        raise ValueError(f"image size {image_size} is not a multiple of the patch size {patch}")
    stages: list[tuple[str, nn.Module]] = [("embed", PatchEmbed(in_channels, dim, patch, image_size, mean, std))]
    points = []
    for b in range(depth):
        stages.append((f"blocks.{b}", EncoderBlock(dim, heads)))
        points.append(f"blocks.{b}")
    stages.append(("head", TokenHead(dim, num_classes)))
    return StagedNet(stages, points)


@register_architecture("vit_ti", "ViT-Ti/4: dim 192, 12 blocks, 3 heads, 4x4 patches; tokens are stitched (12)")
def vit_ti(*, in_channels, num_classes, mean, std, image_size=32) -> StagedNet:
    return _vit(
        in_channels=in_channels,
        num_classes=num_classes,
        mean=mean,
        std=std,
        image_size=image_size,
        dim=192,
        depth=12,
        heads=3,
        patch=4,
    )


@register_architecture("vit_tiny_cpu", "CPU-sized ViT: dim 32, 4 blocks, 2 heads, 4x4 patches (4 points)")
def vit_tiny_cpu(*, in_channels, num_classes, mean, std, image_size=32) -> StagedNet:
    return _vit(
        in_channels=in_channels,
        num_classes=num_classes,
        mean=mean,
        std=std,
        image_size=image_size,
        dim=32,
        depth=4,
        heads=2,
        patch=4,
    )


# ------------------------------------------------------- DeepMind-layout pre-activation nets (RobustBench)


def _tf_same_pad(x: torch.Tensor, stride: int) -> torch.Tensor:
    """TensorFlow's "SAME" padding for a 3x3 convolution: symmetric at stride 1, bottom/right at stride 2."""
    return nn.functional.pad(x, (1, 1, 1, 1) if stride == 1 else (0, 1, 0, 1))


class DMBlock(nn.Module):
    """The pre-activation blocks of DeepMind's robust CIFAR models as RobustBench ships them (Gowal et al.
    2021; Rade & Moosavi-Dezfooli 2021): Swish activations, TF-style padding of the strided convolution, and

    - `wide=True` (WideResNet `_Block`): a 1x1 projection of the activated input when the width changes;
    - `wide=False` (PreActResNet `_PreActBlock`): a 3x3 strided projection of the raw input.
    """

    def __init__(self, in_planes: int, planes: int, stride: int, wide: bool) -> None:
        super().__init__()
        self.stride, self.wide = stride, wide
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 0, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.act = nn.SiLU()  # Swish
        self.shortcut = None
        if wide and in_planes != planes:
            self.shortcut = nn.Conv2d(in_planes, planes, 1, stride, bias=False)
        elif not wide and (stride != 1 or in_planes != planes):
            self.shortcut = nn.Conv2d(in_planes, planes, 3, stride, 0, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.act(self.bn1(x))
        if self.shortcut is None:
            skip = x
        elif self.wide:
            skip = self.shortcut(out)
        else:
            skip = self.shortcut(_tf_same_pad(x, self.stride))
        out = self.conv2(self.act(self.bn2(self.conv1(_tf_same_pad(out, self.stride)))))
        return out + skip


class DMHead(Head):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.silu(self.bn(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def _dm_net(widths, blocks, *, wide, stem_width, in_channels, num_classes, mean, std) -> StagedNet:
    return _preact_net(
        widths,
        blocks,
        in_channels=in_channels,
        num_classes=num_classes,
        mean=mean,
        std=std,
        stem_width=stem_width,
        block=lambda i, o, s: DMBlock(i, o, s, wide),
        head=lambda planes, classes: DMHead(planes, classes, bn=True),
    )


@register_architecture(
    "dm_preact_resnet18", "PreActResNet-18 in DeepMind's layout with Swish (RobustBench Rade2021Helper_R18_*; 8)"
)
def dm_preact_resnet18(*, in_channels, num_classes, mean, std, image_size=32) -> StagedNet:
    return _dm_net(
        [64, 128, 256, 512],
        [2, 2, 2, 2],
        wide=False,
        stem_width=64,
        in_channels=in_channels,
        num_classes=num_classes,
        mean=mean,
        std=std,
    )


@register_architecture(
    "dm_wrn28_10", "WideResNet-28-10 in DeepMind's layout with Swish (RobustBench Gowal2021Improving_28_10_*; 12)"
)
def dm_wrn28_10(*, in_channels, num_classes, mean, std, image_size=32) -> StagedNet:
    return _dm_net(
        [160, 320, 640],
        [4, 4, 4],
        wide=True,
        stem_width=16,
        in_channels=in_channels,
        num_classes=num_classes,
        mean=mean,
        std=std,
    )
