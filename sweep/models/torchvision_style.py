"""Torchvision's layouts of ResNet-18 and VGG-19 with the stitch points of Smith & Marcu 2024 (Comparing Apples and
Oranges: is Stitching Similarity a Load of Spheres?): cut *before* a module, the points named so.

- `resnet18_tv`: torchvision's ResNet-18 (7x7 stride-2 stem, max-pool, post-activation basic blocks): points
  before each residual stage (`before_layer1` .. `before_layer4`; on 28 x 28 input 64 x 7 x 7 before layer 2,
  Section 2) and before the classifier (`before_fc`: the pooled 512-vector, stitched by a linear map).
- `vgg19_tv`: torchvision's VGG-19 without BatchNorm (its `features` / `classifier` indices are the paper's,
  C.2), points before `features.2`, `.10`, `.23`, `.30` and `classifier.0`. 28 x 28 images are padded by 2
  pixels of black to 32 x 32 (the paper trains VGG-19 on 32 x 32 input without saying how): part of the input
  stage. The point before `classifier.0` is taken before the flatten (512 x 7 x 7 after the adaptive average
  pool), so its stitcher is a 1 x 1 convolution like the others': a linear map of the flattened 25,088 features
  would hold 630 M weights, and the flatten has no parameters.

Each point is an identity stage, so cutting after it is cutting before the module it names. Both are initialised
as torchvision initialises them (`_torchvision_init`).
"""

from __future__ import annotations

import torch
from torch import nn
from torchvision.models.resnet import BasicBlock
from torchvision.models.vgg import cfgs, make_layers

from sweep.models.base import Normalize, PooledHead, StagedNet, register_architecture


class _Input(nn.Module):
    """Normalisation, then zero-padding of the pixels to `pad_to` x `pad_to` (black, before normalising)."""

    def __init__(self, mean, std, image_size: int, pad_to: int | None) -> None:
        super().__init__()
        self.norm = Normalize(mean, std)
        self.pad = (pad_to - image_size) // 2 if pad_to and image_size < pad_to else 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pad:
            x = nn.functional.pad(x, (self.pad,) * 4)
        return self.norm(x)


def _torchvision_init(model: nn.Module, linear: bool) -> None:
    """torchvision's own initialisation of its ResNets and VGGs, re-applied after construction in module order
    as torchvision does: Kaiming-normal (fan_out, ReLU) convolutions with zero biases, BatchNorm weight 1 and bias
    0, and for VGG (`linear`) N(0, 0.01) linear layers with zero biases (ResNet's `fc` keeps PyTorch's default).
    Built in torchvision's order, a network gets torchvision's very weights from the same seed (tested). Without
    it, a 19-layer VGG without BatchNorm starts with nearly constant logits (Smith & Marcu train
    `torchvision.models.vgg19(weights=None)`)."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif linear and isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0, 0.01)
            nn.init.zeros_(m.bias)


def _stage(in_planes: int, planes: int, stride: int) -> nn.Sequential:
    downsample = None
    if stride != 1 or in_planes != planes:
        downsample = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))
    return nn.Sequential(BasicBlock(in_planes, planes, stride, downsample), BasicBlock(planes, planes))


class _Classifier(nn.Sequential, PooledHead):
    """torchvision's VGG classifier (keys `classifier.0` ..), its penultimate vector the last linear layer's input."""

    def pooled(self, x: torch.Tensor) -> torch.Tensor:
        for layer in list(self)[:-1]:
            x = layer(x)
        return x

    def classify(self, v: torch.Tensor) -> torch.Tensor:
        return self[-1](v)

    forward = PooledHead.forward


@register_architecture(
    "resnet18_tv", "torchvision's ResNet-18: points before each residual stage and the classifier (Smith & Marcu) (5)"
)
def resnet18_tv(*, in_channels, num_classes, mean, std, image_size=28) -> StagedNet:
    stem = nn.Sequential(
        Normalize(mean, std),
        nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
    )
    stages: list[tuple[str, nn.Module]] = [("stem", stem)]
    in_planes = 64
    for i, planes in enumerate((64, 128, 256, 512), start=1):
        stages += [(f"before_layer{i}", nn.Identity()), (f"layer{i}", _stage(in_planes, planes, 1 if i == 1 else 2))]
        in_planes = planes
    stages += [
        ("avgpool", nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(1))),
        ("before_fc", nn.Identity()),
        ("penultimate", nn.Identity()),  # the same vector, under the name every architecture has
        ("fc", nn.Linear(512, num_classes)),
    ]
    model = StagedNet(stages, [f"before_layer{i}" for i in range(1, 5)] + ["before_fc"])
    _torchvision_init(model, linear=False)
    return model


VGG19_POINTS = (2, 10, 23, 30)  # cut before these indices of torchvision's `features`


@register_architecture(
    "vgg19_tv",
    "torchvision's VGG-19 without BN, 28 px padded to 32: points before features.2/.10/.23/.30, classifier.0",
)
def vgg19_tv(*, in_channels, num_classes, mean, std, image_size=32) -> StagedNet:
    features = list(make_layers(cfgs["E"], batch_norm=False))
    if in_channels != 3:
        features[0] = nn.Conv2d(in_channels, 64, 3, padding=1)
    stages: list[tuple[str, nn.Module]] = [("input", _Input(mean, std, image_size, 32))]
    start = 0
    for stop in VGG19_POINTS:
        stages += [(f"features.{start}-{stop - 1}", nn.Sequential(*features[start:stop]))]
        stages += [(f"before_features.{stop}", nn.Identity())]
        start = stop
    stages += [
        (f"features.{start}-{len(features) - 1}", nn.Sequential(*features[start:])),
        ("avgpool", nn.AdaptiveAvgPool2d(7)),
        ("before_classifier.0", nn.Identity()),
        (
            "classifier",
            _Classifier(
                nn.Flatten(1),
                nn.Linear(512 * 7 * 7, 4096),
                nn.ReLU(True),
                nn.Dropout(),
                nn.Linear(4096, 4096),
                nn.ReLU(True),
                nn.Dropout(),
                nn.Linear(4096, num_classes),
            ),
        ),
    ]
    points = [f"before_features.{k}" for k in VGG19_POINTS] + ["before_classifier.0"]
    model = StagedNet(stages, points)
    _torchvision_init(model, linear=True)
    return model
