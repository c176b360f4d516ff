"""Networks as staged modules with named stitch points (`base.py`: `StagedNet`, the architecture registry,
`split`; `families.py`: the registered architectures; `external.py`: `file:` checkpoints and RobustBench)."""

from sweep.models import families as _families  # noqa: F401  (registers the architectures)
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
