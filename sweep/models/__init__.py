"""Networks as staged modules with named stitch points (`declared.py`: the architecture registry's entries,
without PyTorch; `base.py`: `StagedNet`, `build`, `split`; one file per family of built-in architectures:
`resnet.py`, `preact.py`, `vgg.py`, `vit.py`, `deepmind.py`, `imagenet_tv.py`, `torchvision_style.py`;
`external.py`: `file:` checkpoints and RobustBench). Placement follows Balogh & Jelasity 2023 A.5.1.

The names below load their module on first use (PEP 562), so that reading the registry imports no PyTorch.
"""

from __future__ import annotations

import importlib

from sweep.store.exports import lazy_exports

FAMILIES = ("resnet", "preact", "deepmind", "imagenet_tv", "torchvision_style", "vgg", "vit")

_HOME = {
    **dict.fromkeys(["ARCHITECTURES", "register_architecture"], "declared"),
    **dict.fromkeys(["StagedNet", "activation_shapes", "build", "split", "stitch_points"], "base"),
}
__all__ = sorted([*_HOME, "build_builtin"])


def build_builtin(name: str, **kwargs):
    """Build built-in architecture `name` (its family module, imported now, holds the builder)."""
    for family in FAMILIES:
        importlib.import_module(f"{__name__}.{family}")
    from sweep.models.base import BUILDERS

    return BUILDERS[name](**kwargs)


__getattr__, __dir__ = lazy_exports(__name__, _HOME, globals())
