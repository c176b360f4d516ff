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
- `vgg19_tv_code`: the same network as the authors' notebook (`exp1g_VGG19_synthdata_rank`) cuts and feeds it:
  after `features.1`, `.8`, `.22`, `.29` and `.35` (before `.2`, `.9`, `.23`, `.30`, `.36`; the last one the
  512 x 2 x 2 map before the final max-pool), 28 px images resized bilinearly to 32. Its weights from a seed are
  `vgg19_tv`'s: only the cuts and the input differ.

Each point is an identity stage, so cutting after it is cutting before the module it names. Both are initialised
as torchvision initialises them (`_torchvision_init`).
"""

from __future__ import annotations

import torch
from torch import nn

from sweep.models.base import Normalize, PooledHead, StagedNet, builtin


class _Input(nn.Module):
    """Smaller images brought to `size` x `size` pixels, then normalised: zero-padded (black, `fit="pad"`) or
    resized bilinearly (`fit="resize"`, as torchvision's `Resize` before `ToTensor` in the authors' notebooks)."""

    def __init__(self, mean, std, image_size: int, size: int, fit: str = "pad") -> None:
        super().__init__()
        self.norm = Normalize(mean, std)
        self.size = size if image_size < size else 0
        self.fit = fit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.size and x.shape[-1] < self.size:
            if self.fit == "pad":
                pad = (self.size - x.shape[-1]) // 2
                x = nn.functional.pad(x, (pad,) * 4)
            else:
                x = nn.functional.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False)
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
    from torchvision.models.resnet import BasicBlock  # imported when built: checking a space needs no torchvision

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


@builtin("resnet18_tv")
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


VGG19_POINTS = (2, 10, 23, 30)  # cut before these indices of torchvision's `features`: the text's (C.2)
VGG19_CODE_POINTS = (2, 9, 23, 30, 36)  # the notebook's cuts after features.1/.8/.22/.29/.35


@builtin("vgg19_tv")
def vgg19_tv(*, in_channels, num_classes, mean, std, image_size=32) -> StagedNet:
    return _vgg19(in_channels, num_classes, mean, std, image_size, VGG19_POINTS, fit="pad")


@builtin("vgg19_tv_code")
def vgg19_tv_code(*, in_channels, num_classes, mean, std, image_size=32) -> StagedNet:
    return _vgg19(in_channels, num_classes, mean, std, image_size, VGG19_CODE_POINTS, fit="resize")


def _vgg19(in_channels, num_classes, mean, std, image_size, cuts: tuple[int, ...], fit: str) -> StagedNet:
    """torchvision's VGG-19 (configuration E, no BatchNorm) cut before the `features` indices `cuts` (and, where
    the last cut is not past the features, before `classifier.0`), smaller inputs brought to 32 px by `fit`."""
    from torchvision.models.vgg import cfgs, make_layers

    features = list(make_layers(cfgs["E"], batch_norm=False))
    if in_channels != 3:
        features[0] = nn.Conv2d(in_channels, 64, 3, padding=1)
    stages: list[tuple[str, nn.Module]] = [("input", _Input(mean, std, image_size, 32, fit))]
    start = 0
    for stop in cuts:
        stages += [(f"features.{start}-{stop - 1}", nn.Sequential(*features[start:stop]))]
        stages += [(f"before_features.{stop}", nn.Identity())]
        start = stop
    points = [f"before_features.{k}" for k in cuts]
    stages += [
        (f"features.{start}-{len(features) - 1}", nn.Sequential(*features[start:])),
        ("avgpool", nn.AdaptiveAvgPool2d(7)),
    ]
    if cuts[-1] < len(features) - 1:
        stages += [("before_classifier.0", nn.Identity())]
        points += ["before_classifier.0"]
    stages += [
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
    model = StagedNet(stages, points)
    _torchvision_init(model, linear=True)
    return model
