"""The registered architectures as a search space is checked against them, without PyTorch: each built-in
network's name and description, and its points and activation shapes read from `table.json` (written by
`tests/scripts/architectures.py --write` from freshly built models; a test checks it against them). A
network the table lacks, or an input the table has no shapes for, is built once to measure them
(`sweep.models.base`). `register_architecture` adds a network of your own."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sweep.registry import ARCHITECTURES, did_you_mean, lazy

TABLE = Path(__file__).with_name("table.json")


@functools.cache
def table() -> dict:
    """{arch: {"stitch_points": [...], "points": [...], "shapes": {"CxSxK": {point: shape}}}} of the built-ins."""
    return json.loads(TABLE.read_text()) if TABLE.exists() else {}


def shapes_key(in_channels: int, image_size: int, num_classes: int) -> str:
    return f"{in_channels}x{image_size}x{num_classes}"


@dataclass(frozen=True)
class Architecture:
    """A registered architecture: its builder, and the metadata that validating a search space needs (its
    stitch points and activation shapes: from the table for a built-in, else from a freshly built model)."""

    name: str
    build: Callable  # (*, in_channels, num_classes, mean, std, image_size) -> StagedNet
    description: str
    builtin: bool = False  # listed in table.json

    def _row(self) -> dict | None:
        return table().get(self.name) if self.builtin else None

    def stitch_points(self) -> list[str]:
        """The stitch point names, input to output (what `all` selects)."""
        row = self._row()
        return list(row["stitch_points"]) if row else list(lazy("sweep.models.base:measure_points")(self.name))

    def points(self) -> list[str]:
        """Every point a search space may name: the stitch points, then `penultimate` where it is not one."""
        row = self._row()
        return list(row["points"]) if row else list(lazy("sweep.models.base:measure_points")(self.name, extra=True))

    def graph_nodes(self) -> list[str]:
        """Every node of the network's traced graph in evaluation mode (torchvision's `get_graph_node_names`):
        module outputs (convolutions, BatchNorms, activations, pooling) and functional operations alike.
        Raises for a network torch.fx cannot trace."""
        return list(lazy("sweep.models.base:graph_nodes")(self.name))

    def point_hint(self, point: str, valid: list[str]) -> str:
        """What a space that names `point`, no point of this network, probably meant (`valid`: its points)."""
        return did_you_mean(point, valid)

    def activation_shapes(self, in_channels: int, image_size: int, num_classes: int = 10) -> dict[str, tuple[int, ...]]:
        """The activation shape (without the batch dimension) at every point: (C, H, W) for conv stages,
        (tokens, dim) for transformer ones, (D,) for `penultimate`."""
        row = self._row()
        known = row["shapes"].get(shapes_key(in_channels, image_size, num_classes)) if row else None
        if known is not None:
            return {p: tuple(s) for p, s in known.items()}
        return lazy("sweep.models.base:measure_shapes")(self.name, in_channels, image_size, num_classes)


def register_architecture(name: str, description: str, version: str | None = None):
    """Decorator: add a builder `fn(*, in_channels, num_classes, mean, std, image_size) -> StagedNet`
    (`version`: a string to bump when it changes; default: its plugin module's)."""
    return ARCHITECTURES.register(name, lambda fn: Architecture(name, fn, description), version)


BUILTIN = {
    "resnet_tiny": "CPU-sized residual net: stride-2 stem, widths 8/16/32, 2 blocks per stage (6 points)",
    "resnet18": "CIFAR-style ResNet-18 of the papers: 3x3 stem, no max-pool (8 points)",
    "resnet50": "CIFAR-style ResNet-50: bottleneck blocks 3/4/6/3 (16 points)",
    "resnet18_imagenet": "ImageNet-style ResNet-18 (7x7 stride-2 stem and max-pool), for the ImageNet subsets (8)",
    "preact_resnet18": "PreActResNet-18 (He et al. 2016b), CIFAR-style (8 points)",
    **{
        f"wrn28_{k}": f"WideResNet-28-{k} (Zagoruyko & Komodakis), 3 groups of 4 blocks (12 points)"
        for k in (1, 5, 10)  # the widths Cianfarani et al. 2022 compare (Figs 3, 5a)
    },
    "dm_preact_resnet18": "PreActResNet-18 in DeepMind's layout with Swish (RobustBench Rade2021Helper_R18_*; 8)",
    "dm_wrn28_10": "WideResNet-28-10 in DeepMind's layout with Swish (RobustBench Gowal2021Improving_28_10_*; 12)",
    **{
        name: f"torchvision's ImageNet {what} (Jones et al. 2022; Salman et al. 2020 checkpoints)"
        for name, what in (
            ("tv_resnet18", "ResNet-18, points after each block (8)"),
            ("tv_resnet50", "ResNet-50, points after each block (16)"),
            ("tv_wide_resnet50_2", "Wide ResNet-50-2 (16)"),
            ("tv_wide_resnet50_4", "Wide ResNet-50-4, the robustness library's (16)"),
            ("tv_resnext50_32x4d", "ResNeXt-50 32x4d (16)"),
            ("tv_vgg16_bn", "VGG-16 with BN, points after each max-pool (5)"),
            ("tv_densenet161", "DenseNet-161, points after each dense block and transition (4)"),
            ("tv_shufflenet_v2_x1_0", "ShuffleNet V2 x1.0, points after each stage and conv5 (4)"),
            ("tv_mobilenet_v2", "MobileNet V2, points after each resolution (6)"),
        )
    },
    "resnet18_tv": "torchvision's ResNet-18: points before each residual stage and the classifier (Smith & Marcu) (5)",
    "vgg19_tv": (
        "torchvision's VGG-19 without BN, 28 px padded to 32: points before features.2/.10/.23/.30, classifier.0"
    ),
    "vgg19_tv_code": (
        "vgg19_tv as Smith & Marcu's notebook cuts it: 28 px resized to 32, points before features.2/.9/.23/.30/.36"
    ),
    "vgg11": "VGG-11 with BatchNorm, CIFAR-style; stitch points after each conv+BN (8)",
    "vit_ti": "ViT-Ti/4: dim 192, 12 blocks, 3 heads, 4x4 patches; tokens are stitched (12)",
    "vit_ti_16": "ViT-Ti/16 (timm's vit_tiny_patch16_224, DeiT-Ti): dim 192, 12 blocks, 3 heads, 16x16 patches (12)",
    "vit_tiny_cpu": "CPU-sized ViT: dim 32, 4 blocks, 2 heads, 4x4 patches (4 points)",
}

# a library network by name (`torchvision:resnet50`, `timm:convnext_tiny`): its entry made on first lookup
for _library in ("torchvision", "timm"):
    ARCHITECTURES.prefix(f"{_library}:", "sweep.models.library:entry")

for _name, _description in BUILTIN.items():
    ARCHITECTURES.add(
        _name, Architecture(_name, functools.partial(lazy("sweep.models:build_builtin"), _name), _description, True)
    )
