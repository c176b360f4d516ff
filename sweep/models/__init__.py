"""Networks as staged modules with named stitch points (`base.py`: `StagedNet`, the architecture registry,
`split`; one file per family of registered architectures: `resnet.py`, `preact.py`, `vgg.py`, `vit.py`,
`deepmind.py`, `imagenet_tv.py`; `external.py`: `file:` checkpoints and RobustBench). Placement follows
Balogh & Jelasity 2023 A.5.1."""

# each registers its architectures
from sweep.models import deepmind, imagenet_tv, preact, resnet, torchvision_style, vgg, vit  # noqa: F401
from sweep.models.base import (
    ARCHITECTURES,
    StagedNet,
    activation_shapes,
    build,
    register_architecture,
    split,
    stitch_points,
)

__all__ = [
    "ARCHITECTURES",
    "StagedNet",
    "activation_shapes",
    "build",
    "register_architecture",
    "split",
    "stitch_points",
]
