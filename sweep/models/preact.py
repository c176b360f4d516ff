"""Pre-activation nets: PreActResNet-18 and WideResNet-28-10. They have no activation after the addition, so
the block output, the residual stream that the next block's BN-ReLU and skip connection both read, is the
representation (Balogh & Jelasity 2023 says "after the activation" for them)."""

from __future__ import annotations

import torch
from torch import nn

from sweep.models.base import Normalize, StagedNet, builtin
from sweep.models.resnet import Head


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


@builtin("preact_resnet18")
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


def _wrn28(k: int):
    """WideResNet-28-k (Zagoruyko & Komodakis): widths 16k, 32k, 64k, 3 groups of 4 blocks (12 points)."""

    def build(*, in_channels, num_classes, mean, std, image_size=32) -> StagedNet:
        widths = [16 * k, 32 * k, 64 * k]
        return _preact_net(
            widths, [4, 4, 4], in_channels=in_channels, num_classes=num_classes, mean=mean, std=std, stem_width=16
        )

    return build


# The widths Cianfarani et al. 2022 compare (Figs 3, 5a): 1, 5 and 10.
for _k in (1, 5, 10):
    builtin(f"wrn28_{_k}")(_wrn28(_k))
