"""VGG-11 with BatchNorm, CIFAR-style; stitch points after each conv + BN (before the ReLU)."""

from __future__ import annotations

import torch
from torch import nn

from sweep.models.base import Normalize, PooledHead, StagedNet, builtin

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


class VGGHead(PooledHead):
    def __init__(self, planes: int, num_classes: int) -> None:
        super().__init__()
        self.fc = nn.Linear(planes, num_classes)

    def pooled(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.max_pool2d(torch.relu(x), 2, ceil_mode=True)
        return torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)


@builtin("vgg11")
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
