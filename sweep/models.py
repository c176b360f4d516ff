"""Architecture registry, stitch points and `split`.

Every architecture is a `StagedNet`: an ordered list of named stages run one after the other. A stitch point
is the name of a stage after which the representation may be cut; for residual nets these are the residual
blocks (seed 000, A.5.1), cut after the addition and *before* the block's closing ReLU, which therefore runs
at the start of the following stage. Inputs are pixels in [0, 1]; normalisation is the first stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn


class Normalize(nn.Module):
    def __init__(self, mean: tuple[float, ...], std: tuple[float, ...]) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


class BasicBlock(nn.Module):
    """ResNet basic block that takes the *pre-activation* output of the previous stage.

    The ReLU that a textbook block applies after its addition is applied here to the input instead, so the
    block's output is the sum before activation: the place where seed 000 puts its stitching layers.
    """

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(x)
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return out + self.shortcut(x)


class Head(nn.Module):
    def __init__(self, planes: int, num_classes: int) -> None:
        super().__init__()
        self.fc = nn.Linear(planes, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(x)
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


class StagedNet(nn.Module):
    """A network given as ordered named stages; `stitch_points` names the stages one may cut after."""

    def __init__(self, stages: list[tuple[str, nn.Module]], stitch_points: list[str]) -> None:
        super().__init__()
        self.stage_names = [name for name, _ in stages]
        # ModuleDict keys may not contain dots; the public names keep the dotted form (torchvision style).
        self.stages = nn.ModuleDict({name.replace(".", "_"): m for name, m in stages})
        unknown = [p for p in stitch_points if p not in self.stage_names]
        if unknown:
            raise ValueError(f"stitch points {unknown} are not stages of this network")
        self.stitch_points = list(stitch_points)

    def stage(self, name: str) -> nn.Module:
        return self.stages[name.replace(".", "_")]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for name in self.stage_names:
            x = self.stage(name)(x)
        return x


def _resnet(
    widths: list[int], blocks: list[int], in_channels: int, num_classes: int, mean, std,
    stem_stride: int = 1,
) -> StagedNet:
    stem = nn.Sequential(
        Normalize(mean, std),
        nn.Conv2d(in_channels, widths[0], 3, stem_stride, 1, bias=False),
        nn.BatchNorm2d(widths[0]),
    )
    stages: list[tuple[str, nn.Module]] = [("stem", stem)]
    points = []
    in_planes = widths[0]
    for i, (planes, n) in enumerate(zip(widths, blocks), start=1):
        for b in range(n):
            stride = 2 if (b == 0 and i > 1) else 1
            name = f"layer{i}.{b}"
            stages.append((name, BasicBlock(in_planes, planes, stride)))
            points.append(name)
            in_planes = planes
    stages.append(("head", Head(in_planes, num_classes)))
    return StagedNet(stages, points)


@dataclass(frozen=True)
class Architecture:
    name: str
    build: Callable[..., StagedNet]
    description: str


ARCHITECTURES: dict[str, Architecture] = {}


def register_architecture(name: str, description: str):
    """Decorator: add a builder `fn(in_channels, num_classes, mean, std) -> StagedNet` to the registry."""

    def wrap(fn: Callable[..., StagedNet]) -> Callable[..., StagedNet]:
        if name in ARCHITECTURES:
            raise ValueError(f"architecture {name!r} is registered twice")
        ARCHITECTURES[name] = Architecture(name, fn, description)
        return fn

    return wrap


@register_architecture(
    "resnet_tiny", "CPU-sized residual net: stride-2 stem, widths 8/16/32, 2 blocks per stage (6 points)"
)
def resnet_tiny(in_channels: int = 1, num_classes: int = 10, mean=(0.5,), std=(0.5,)) -> StagedNet:
    # The stride-2 stem quarters the cost of the first stage: what makes PGD training fit a 2-core budget.
    return _resnet([8, 16, 32], [2, 2, 2], in_channels, num_classes, mean, std, stem_stride=2)


@register_architecture("resnet18", "CIFAR-style ResNet-18 of the papers: 3x3 stem, no max-pool, 8 blocks")
def resnet18(in_channels: int = 3, num_classes: int = 10, mean=(0.5,), std=(0.5,)) -> StagedNet:
    return _resnet([64, 128, 256, 512], [2, 2, 2, 2], in_channels, num_classes, mean, std)


def build(arch: str, in_channels: int, num_classes: int, mean, std) -> StagedNet:
    """Build a registered architecture with fresh weights."""
    if arch not in ARCHITECTURES:
        raise ValueError(
            f"unknown architecture {arch!r}; registered: {sorted(ARCHITECTURES)}"
        )
    mean = tuple(mean) if len(mean) == in_channels else tuple(mean) * in_channels
    std = tuple(std) if len(std) == in_channels else tuple(std) * in_channels
    return ARCHITECTURES[arch].build(in_channels, num_classes, mean, std)


def stitch_points(arch: str) -> list[str]:
    """The stitch point names of a registered architecture, input to output."""
    return build(arch, 1, 10, (0.5,), (0.5,)).stitch_points


def check_point(model: StagedNet, point: str) -> None:
    if point not in model.stitch_points:
        raise ValueError(
            f"unknown stitch point {point!r}; valid points, input to output: {model.stitch_points}"
        )


def split(model: StagedNet, point: str) -> tuple[nn.Sequential, nn.Sequential]:
    """Cut `model` after stage `point`: front = stages up to and including it, end = the rest.

    Both halves share the model's modules (no copies); `end(front(x)) == model(x)`.
    """
    check_point(model, point)
    k = model.stage_names.index(point) + 1
    front = nn.Sequential(*[model.stage(n) for n in model.stage_names[:k]])
    end = nn.Sequential(*[model.stage(n) for n in model.stage_names[k:]])
    return front, end
