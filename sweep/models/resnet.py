"""ResNets of the papers (CIFAR-style ResNet-18 and ResNet-50) and the CPU-sized `resnet_tiny`.

Placement follows Balogh & Jelasity 2023 A.5.1: cut after each residual block, after the addition and before the
activation that follows (that activation runs at the start of the next stage)."""

from __future__ import annotations

import torch
from torch import nn

from sweep.models.base import Normalize, PooledHead, StagedNet, builtin


class BasicBlock(nn.Module):
    """ResNet basic block taking the *pre-activation* output of the previous stage.

    The ReLU a textbook block applies after its addition is applied here to the input instead, so the
    block's output is the sum before activation: the place where Balogh & Jelasity 2023 puts its stitching layers.
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


class Head(PooledHead):
    """Optional BN, then ReLU, global average pooling (the penultimate vector) and the linear classifier."""

    def __init__(self, planes: int, num_classes: int, bn: bool = False) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(planes) if bn else nn.Identity()
        self.fc = nn.Linear(planes, num_classes)

    def pooled(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn(x))
        return torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)


def _residual_net(
    block,
    widths,
    blocks,
    *,
    in_channels,
    num_classes,
    mean,
    std,
    stem_stride=1,
    stem_bn=True,
    head_bn=False,
    imagenet_stem=False,
) -> StagedNet:
    in_planes = widths[0]
    if imagenet_stem:  # He et al.'s ImageNet stem: 7x7 stride-2 convolution, BN, ReLU, 3x3 stride-2 max-pool
        conv = nn.Conv2d(in_channels, in_planes, 7, 2, 3, bias=False)
        stem = [Normalize(mean, std), conv, nn.BatchNorm2d(in_planes), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    else:
        stem = [Normalize(mean, std), nn.Conv2d(in_channels, in_planes, 3, stem_stride, 1, bias=False)]
    if stem_bn and not imagenet_stem:
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


@builtin("resnet_tiny")
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


@builtin("resnet18")
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


@builtin("resnet50")
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


@builtin("resnet18_imagenet")
def resnet18_imagenet(*, in_channels, num_classes, mean, std, image_size=160) -> StagedNet:
    return _residual_net(
        BasicBlock,
        [64, 128, 256, 512],
        [2, 2, 2, 2],
        in_channels=in_channels,
        num_classes=num_classes,
        mean=mean,
        std=std,
        imagenet_stem=True,
    )
