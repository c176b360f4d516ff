"""torchvision's ImageNet architectures, as Jones et al. 2022 (Table 1) use them through Salman et al. 2020's
robust checkpoints: resnet18, resnet50, wide_resnet50_2, wide_resnet50_4 (the robustness library's: torchvision's
ResNet-50 with width_per_group 256), resnext50_32x4d, vgg16_bn, densenet161, shufflenet_v2_x1_0, mobilenet_v2.

Each is torchvision's own network cut into stages whose modules keep torchvision's names (a stage holds
`layer1` with its block `0`, `features` with its layers `7`..`13`, ...), so a torchvision state dict maps
onto ours by the stage prefix alone (`sweep.models.external`), and the mapped network is checked against
torchvision's. Stitch points: after each residual block (ResNets), after each max-pool (VGG), after each dense
block with its transition (DenseNet), after each stage (ShuffleNet), after each change of resolution
(MobileNet); `penultimate` on all (the vector the last linear layer reads). Inputs are pixels in [0, 1]; the
normalisation is the first module (`normalize`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from sweep.models.base import Normalize, PooledHead, StagedNet, builtin


class Named(nn.Module):
    """Modules run in order, registered under the names they have in torchvision's network."""

    def __init__(self, named: list[tuple[str, nn.Module]]) -> None:
        super().__init__()
        for name, module in named:
            self.add_module(name, module)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for module in self.children():
            x = module(x)
        return x


class TVHead(PooledHead):
    """The classifier stage: torchvision's modules under their names; `pool` makes the penultimate vector
    from the last stage's output and `last` names the final linear layer (an index into a Sequential
    `classifier` when the penultimate is inside it)."""

    def __init__(self, named: list[tuple[str, nn.Module]], pool: Callable, last: str) -> None:
        super().__init__()
        for name, module in named:
            self.add_module(name, module)
        self._pool, self._last = pool, last

    def _linear(self) -> nn.Module:
        holder, _, index = self._last.partition(".")
        return getattr(self, holder)[int(index)] if index else getattr(self, holder)

    def pooled(self, x: torch.Tensor) -> torch.Tensor:
        v = self._pool(self, x)
        holder, _, index = self._last.partition(".")
        if index:  # the layers of a Sequential classifier before its last linear layer
            v = getattr(self, holder)[: int(index)](v)
        return v

    def classify(self, v: torch.Tensor) -> torch.Tensor:
        return self._linear()(v)


def _input_conv(conv: nn.Conv2d, in_channels: int) -> nn.Conv2d:
    if in_channels == 3:
        return conv
    bias = conv.bias is not None
    return nn.Conv2d(in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding, bias=bias)


def _flat_pool(head: TVHead, x: torch.Tensor) -> torch.Tensor:
    return torch.flatten(head.avgpool(x), 1)


def _resnet(net: nn.Module, in_channels: int, mean, std) -> StagedNet:
    net.conv1 = _input_conv(net.conv1, in_channels)
    stem = [(n, getattr(net, n)) for n in ("conv1", "bn1", "relu", "maxpool")]
    stem = Named([("normalize", Normalize(mean, std)), *stem])
    stages: list[tuple[str, nn.Module]] = [("stem", stem)]
    for i in range(1, 5):
        layer = getattr(net, f"layer{i}")
        stages += [(f"layer{i}.{b}", Named([(f"layer{i}", layer[b : b + 1])])) for b in range(len(layer))]
    points = [name for name, _ in stages[1:]]
    stages.append(("head", TVHead([("avgpool", net.avgpool), ("fc", net.fc)], _flat_pool, "fc")))
    return StagedNet(stages, points)


def _vgg16_bn(in_channels: int, num_classes: int, mean, std) -> StagedNet:
    net = reference("tv_vgg16_bn", num_classes)
    net.features[0] = _input_conv(net.features[0], in_channels)
    stages: list[tuple[str, nn.Module]] = []
    start = 0
    for k, pool in enumerate((6, 13, 23, 33, 43)):
        named = [("features", net.features[start : pool + 1])]
        stages.append((f"features.{pool}", Named(([("normalize", Normalize(mean, std))] if k == 0 else []) + named)))
        start = pool + 1
    head = TVHead([("avgpool", net.avgpool), ("classifier", net.classifier)], _flat_pool, "classifier.6")
    return StagedNet([*stages, ("head", head)], [name for name, _ in stages])


def _densenet161(in_channels: int, num_classes: int, mean, std) -> StagedNet:
    net = reference("tv_densenet161", num_classes)
    f = net.features
    f.conv0 = _input_conv(f.conv0, in_channels)
    stem = Named([("normalize", Normalize(mean, std)), ("features", f[0:4])])
    stages: list[tuple[str, nn.Module]] = [("stem", stem)]
    for k, (a, b) in enumerate(((4, 6), (6, 8), (8, 10), (10, 12)), start=1):
        stages.append((f"denseblock{k}", Named([("features", f[a:b])])))

    def pool(head: TVHead, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(nn.functional.adaptive_avg_pool2d(torch.relu(x), 1), 1)

    head = TVHead([("classifier", net.classifier)], pool, "classifier")
    return StagedNet([*stages, ("head", head)], [name for name, _ in stages[1:]])


def _shufflenet(in_channels: int, num_classes: int, mean, std) -> StagedNet:
    net = reference("tv_shufflenet_v2_x1_0", num_classes)
    net.conv1[0] = _input_conv(net.conv1[0], in_channels)
    stages = [("stem", Named([("normalize", Normalize(mean, std)), ("conv1", net.conv1), ("maxpool", net.maxpool)]))]
    stages += [(n, Named([(n, getattr(net, n))])) for n in ("stage2", "stage3", "stage4", "conv5")]
    head = TVHead([("fc", net.fc)], lambda head, x: x.mean([2, 3]), "fc")
    return StagedNet([*stages, ("head", head)], [name for name, _ in stages[1:]])


def _mobilenet_v2(in_channels: int, num_classes: int, mean, std) -> StagedNet:
    net = reference("tv_mobilenet_v2", num_classes)
    net.features[0][0] = _input_conv(net.features[0][0], in_channels)
    stages: list[tuple[str, nn.Module]] = []
    start = 0
    for k, stop in enumerate((1, 3, 6, 13, 17, 18)):  # the last layer of each resolution, then the 1x1 conv
        named = [("features", net.features[start : stop + 1])]
        stages.append((f"features.{stop}", Named(([("normalize", Normalize(mean, std))] if k == 0 else []) + named)))
        start = stop + 1

    def pool(head: TVHead, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)

    head = TVHead([("classifier", net.classifier)], pool, "classifier.1")
    return StagedNet([*stages, ("head", head)], [name for name, _ in stages])


# torchvision's network of each architecture: the reference a mapped checkpoint is checked against. torchvision
# is imported when one is built, not with this module (it costs seconds that checking a space does not need).
REFERENCES = {
    "tv_resnet18": "resnet18",
    "tv_resnet50": "resnet50",
    "tv_wide_resnet50_2": "wide_resnet50_2",
    "tv_wide_resnet50_4": None,  # the robustness library's: ResNet-50 with width_per_group 256
    "tv_resnext50_32x4d": "resnext50_32x4d",
    "tv_vgg16_bn": "vgg16_bn",
    "tv_densenet161": "densenet161",
    "tv_shufflenet_v2_x1_0": "shufflenet_v2_x1_0",
    "tv_mobilenet_v2": "mobilenet_v2",
}


def reference(arch: str, num_classes: int) -> nn.Module:
    """torchvision's own network of `arch` (a key of `REFERENCES`), freshly initialised."""
    from torchvision import models as tv
    from torchvision.models.resnet import Bottleneck

    if arch == "tv_wide_resnet50_4":
        return tv.ResNet(Bottleneck, [3, 4, 6, 3], num_classes, width_per_group=256)
    return getattr(tv, REFERENCES[arch])(num_classes=num_classes)


_BUILDERS = {"tv_vgg16_bn": _vgg16_bn, "tv_densenet161": _densenet161}
_BUILDERS |= {"tv_shufflenet_v2_x1_0": _shufflenet, "tv_mobilenet_v2": _mobilenet_v2}


def _register(name: str) -> None:
    def build(*, in_channels, num_classes, mean, std, image_size=224) -> StagedNet:
        if name in _BUILDERS:
            return _BUILDERS[name](in_channels, num_classes, mean, std)
        return _resnet(reference(name, num_classes), in_channels, mean, std)

    builtin(name)(build)


for _name in (
    "tv_resnet18",
    "tv_resnet50",
    "tv_wide_resnet50_2",
    "tv_wide_resnet50_4",
    "tv_resnext50_32x4d",
    "tv_vgg16_bn",
    "tv_densenet161",
    "tv_shufflenet_v2_x1_0",
    "tv_mobilenet_v2",
):
    _register(_name)
