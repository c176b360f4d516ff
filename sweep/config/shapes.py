"""What validation reads off the registered architectures' activation shapes (computed lazily and cached by
the registry entries, so no model is built here): whether direct matching's least-squares fit is determined,
and which layout PWCCA and OPD take for a pair of layers."""

from __future__ import annotations

import math
from typing import Any

from sweep.config.errors import SpecError
from sweep.registry import ARCHITECTURES, DATASETS, lazy, library_version


def activation_shape(arch: str, dataset: str, point: str) -> tuple[int, ...]:
    """The shape of one image's activation at `point` of `arch` on `dataset`'s images: (C, H, W), (T, D), or
    (D,) for a vector (the pooled features before a classifier)."""
    info = DATASETS[dataset]
    return tuple(ARCHITECTURES[arch].activation_shapes(info.channels, info.image_size, info.num_classes)[point])


def check_builds(arch: str, dataset: str, field: str) -> None:
    """A donor's architecture that is not a shipped one (a plugin's) is built and run once on `dataset`'s image
    shape before anything else: a builder that refuses the engine's keywords, stitch points that are not
    stages, or a stage that fails on the shape before it stops the command here, in one line naming the
    builder's file and line and what was expected, rather than as a traceback later. Shipped networks are
    not built (their points and shapes are in the architectures' table)."""
    if not arch or arch not in ARCHITECTURES or ARCHITECTURES.get_entry(arch).builtin:
        return
    info = DATASETS[dataset]
    problem = lazy("sweep.models.base:build_problem")(arch, info.channels, info.image_size, info.num_classes)
    if problem:
        shape = f"{info.channels}x{info.image_size}x{info.image_size}"
        expected = f"an architecture that builds and classifies the {shape} images of {dataset}"
        raise SpecError(field, expected, arch, " ".join(problem.split()))


def check_library_arch(raw: Any, path: str) -> Any:
    """A library network (`torchvision:resnet50`) is looked up before its donor is read, so that an unknown
    model name is refused in one line with the library's did-you-mean (and a known one is registered)."""
    arch = raw.get("arch") if isinstance(raw, dict) else None
    if library_version(arch):
        try:
            ARCHITECTURES.get_entry(arch)
        except KeyError as exc:
            raise SpecError(f"{path}.arch", "a model of the library", arch, str(exc)) from None
    return raw


def channels(shape: tuple[int, ...]) -> int:
    return shape[0] if len(shape) == 3 else shape[-1]


def positions(shape: tuple[int, ...]) -> int:
    """Rows one image gives a 1x1 (per-position or per-token) map: H*W, the token count, or 1 for a vector."""
    if len(shape) == 1:
        return 1
    return math.prod(shape[1:]) if len(shape) == 3 else shape[0]


def check_dm_samples(field: str, k: int, sources: list[tuple], targets: list[tuple], between: str) -> None:
    """Direct matching solves C_in + 1 unknowns per output channel from K images x the target's positions:
    refuse a K that leaves the fit from some source shape to some target shape undetermined, saying which K
    is needed (`between` names the layers in the message)."""
    needed = max(math.ceil((channels(s) + 1) / positions(t)) for s in sources for t in targets)
    if k < needed:
        raise SpecError(field, f"K >= {needed} images for a determined least-squares fit {between}", k)


def layout(setting: str, dataset: str, front_arch: str, point: str, end_arch: str, end_point: str) -> str:
    """`auto` resolves as Balogh & Jelasity 2025's reference code does: per-position rows (N*H*W x C, or N*T x D for
    tokens) when the two activation shapes match, pooled rows (N x C) otherwise."""
    if setting != "auto":
        return setting
    same = activation_shape(front_arch, dataset, point) == activation_shape(end_arch, dataset, end_point)
    return "positions" if same else "pooled"
