"""Pre-activation nets in DeepMind's layout (Swish, 3x3 shortcuts, TF-style padding), as RobustBench's
Rade2021Helper_R18_* and Gowal2021Improving_28_10_* models."""

from __future__ import annotations

import torch
from torch import nn

from sweep.models.base import StagedNet, builtin
from sweep.models.preact import _preact_net
from sweep.models.resnet import Head


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
    def pooled(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.silu(self.bn(x))
        return torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)


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


@builtin("dm_preact_resnet18")
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


@builtin("dm_wrn28_10")
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
