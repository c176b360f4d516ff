"""Architecture registry, stitch points and `split`.

Every architecture is a `StagedNet`: an ordered list of named stages run one after the other. A stitch point
is the name of a stage after which the representation may be cut. Inputs are pixels in [0, 1];
normalisation is the first stage. The registered architectures live in one module per family in `sweep.models`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from sweep.config.failures import describe_failure
from sweep.models.declared import Architecture, register_architecture  # noqa: F401  (re-exported)
from sweep.registry import ARCHITECTURES


class Normalize(nn.Module):
    def __init__(self, mean: tuple[float, ...], std: tuple[float, ...]) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


PENULTIMATE = "penultimate"


class PooledHead(nn.Module):
    """A classifier stage that exposes its penultimate vector (Jones et al. 2022's representation layer): the
    pooled features the last linear layer reads. `forward(x) == classify(pooled(x))`."""

    def pooled(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def classify(self, v: torch.Tensor) -> torch.Tensor:
        return self.fc(v)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classify(self.pooled(x))


class _HeadPart(nn.Module):
    """One half of a `PooledHead` (`pooled` or `classify`) as a stage of its own; it shares the head's modules."""

    def __init__(self, head: nn.Module, part: str) -> None:
        super().__init__()
        self.head, self.part = head, part

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return getattr(self.head, self.part)(x)


class StagedNet(nn.Module):
    """A network given as ordered named stages; `stitch_points` names the stages one may cut after (`all` in a
    search space). Every network also has the point `penultimate` (`extra_points`): a stage of that name, or,
    when the last stage is a `PooledHead`, the cut inside it, so the state dict keeps the head's keys."""

    def __init__(self, stages: list[tuple[str, nn.Module]], stitch_points: list[str]) -> None:
        super().__init__()
        names = [name for name, _ in stages]
        # ModuleDict keys may not contain dots; the public names keep the dotted form (torchvision style).
        self.stages = nn.ModuleDict({name.replace(".", "_"): m for name, m in stages})
        self._order = list(self.stages)  # the modules forward runs (what torch.fx traces)
        views = {}
        last_name, last = stages[-1]
        if isinstance(last, PooledHead) and PENULTIMATE not in names:
            views = {PENULTIMATE: _HeadPart(last, "pooled"), last_name: _HeadPart(last, "classify")}
            names = names[:-1] + [PENULTIMATE, last_name]
        self.__dict__["_views"] = views  # not submodules: the state dict holds the head once
        self.stage_names = names
        unknown = [p for p in stitch_points if p not in self.stage_names]
        if unknown:
            raise ValueError(f"stitch points {unknown} are not stages of this network (its stages: {names})")
        self.stitch_points = list(stitch_points)
        self.extra_points = [PENULTIMATE] if PENULTIMATE in names and PENULTIMATE not in stitch_points else []

    def stage(self, name: str) -> nn.Module:
        view = self._views.get(name)
        return view if view is not None else self.stages[name.replace(".", "_")]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for key in self._order:
            x = self.stages[key](x)
        return x


BUILDERS: dict[str, Callable[..., StagedNet]] = {}  # the built-in networks' builders, by name


def builtin(name: str):
    """Decorator: the builder of built-in network `name` (declared, with its description, in `declared.py`)."""

    def wrap(fn: Callable[..., StagedNet]) -> Callable[..., StagedNet]:
        if name in BUILDERS:
            raise ValueError(f"built-in architecture {name!r} has two builders")
        BUILDERS[name] = fn
        return fn

    return wrap


def build(arch: str, in_channels: int, num_classes: int, mean, std, image_size: int = 32) -> StagedNet:
    """Build a registered architecture with fresh weights for `image_size` x `image_size` inputs."""
    entry = ARCHITECTURES.get_entry(arch)
    mean = tuple(mean) if len(mean) == in_channels else tuple(mean) * in_channels
    std = tuple(std) if len(std) == in_channels else tuple(std) * in_channels
    model = entry.build(in_channels=in_channels, num_classes=num_classes, mean=mean, std=std, image_size=image_size)
    if entry.builtin and model.stitch_points != entry.stitch_points():  # search spaces were checked against it
        raise RuntimeError(
            f"architecture {arch!r}: its stitch points {model.stitch_points} differ from sweep/models/table.json's"
            f" {entry.stitch_points()}; run tests/scripts/architectures.py --write"
        )
    return model


def build_problem(arch: str, in_channels: int, image_size: int, num_classes: int) -> str | None:
    """Why `arch` cannot serve as a donor on `in_channels` x `image_size` px images of `num_classes` classes
    (None: it can): its builder refuses the engine's keyword arguments or raises, returns no `StagedNet`, a
    stage fails on the activation the stage before gives, or the output is not one logit per class. Each
    reason names the builder's file and line and what was expected, on one line; checked once per builder
    (a plugin imported again registers a new one) and input."""
    return _build_problem(ARCHITECTURES.get_entry(arch).build, arch, in_channels, image_size, num_classes)


@functools.cache
def _build_problem(fn: Callable, arch: str, in_channels: int, image_size: int, num_classes: int) -> str | None:
    code = getattr(fn, "__code__", None)
    builder = f"builder {getattr(fn, '__name__', arch)}" + (
        f" ({Path(code.co_filename).name}:{code.co_firstlineno})" if code else ""
    )
    kwargs = dict(in_channels=in_channels, num_classes=num_classes, mean=(0.5,) * in_channels)
    kwargs.update(std=(0.5,) * in_channels, image_size=image_size)
    try:
        inspect.signature(fn).bind(**kwargs)
    except TypeError as exc:
        return f"its {builder} must take the keyword arguments {', '.join(kwargs)} ({exc})"
    except ValueError:  # no signature to read: its call says
        pass
    try:
        model = fn(**kwargs)
    except Exception as exc:
        return f"its {builder} raised {describe_failure(exc)}"
    if not isinstance(model, StagedNet):
        return f"its {builder} returned a {type(model).__name__}, expected a StagedNet"
    return _forward_problem(model, in_channels, image_size, num_classes)


def _forward_problem(model: StagedNet, in_channels: int, image_size: int, num_classes: int) -> str | None:
    """The first stage of `model` that fails on two blank images, with the shapes each stage gave before it;
    or an output that is not (images, num_classes) logits."""
    x, seen = torch.zeros(2, in_channels, image_size, image_size), []
    with torch.no_grad():
        for name in model.stage_names:
            try:
                x = model.eval().stage(name)(x)
            except Exception as exc:
                shapes = ", ".join(seen) or "none"
                return (
                    f"its stage {name!r} fails on an input of shape {tuple(x.shape)} (the stages before gave {shapes}):"
                    f" {describe_failure(exc)}"
                )
            seen.append(f"{name} {tuple(x.shape)}")
    if tuple(x.shape) != (2, num_classes):
        return f"its output has shape {tuple(x.shape)}, expected (images, {num_classes}) logits"
    return None


@functools.cache
def measure_points(arch: str, extra: bool = False) -> tuple[str, ...]:
    """The stitch points (and with `extra` the other points) of a freshly built `arch`."""
    model = build(arch, 1, 10, (0.5,), (0.5,))
    return tuple(model.stitch_points + (model.extra_points if extra else []))


@functools.cache
def graph_nodes(arch: str) -> tuple[str, ...]:
    from torchvision.models.feature_extraction import get_graph_node_names

    return tuple(get_graph_node_names(build(arch, 1, 10, (0.5,), (0.5,)).eval())[1])


def stitch_points(arch: str) -> list[str]:
    """The stitch point names of a registered architecture, input to output."""
    return ARCHITECTURES.get_entry(arch).stitch_points()


@functools.cache
def measure_shapes(arch: str, in_channels: int, image_size: int, num_classes: int) -> dict[str, tuple[int, ...]]:
    """The activation shape at every point of a freshly built `arch`, from one forward pass on a blank image."""
    model = build(arch, in_channels, num_classes, (0.5,), (0.5,), image_size=image_size).eval()
    shapes = {}
    x = torch.zeros(1, in_channels, image_size, image_size)
    with torch.no_grad():
        for name in model.stage_names:
            x = model.stage(name)(x)
            if name in model.stitch_points or name in model.extra_points:
                shapes[name] = tuple(x.shape[1:])
    return shapes


def activation_shapes(
    arch: str, in_channels: int, image_size: int, num_classes: int = 10
) -> dict[str, tuple[int, ...]]:
    """The activation shape (without the batch dimension) at every point, from one forward pass of a freshly
    built model on a blank image: (C, H, W) for conv stages, (tokens, dim) for transformer ones, (D,) for
    `penultimate`."""
    return ARCHITECTURES.get_entry(arch).activation_shapes(in_channels, image_size, num_classes)


def check_point(model: StagedNet, point: str) -> None:
    valid = model.stitch_points + model.extra_points
    if point not in valid:
        raise ValueError(f"unknown stitch point {point!r}; valid points, input to output: {valid}")


def split(model: StagedNet, point: str) -> tuple[nn.Sequential, nn.Sequential]:
    """Cut `model` after stage `point`: front = stages up to and including it, end = the rest.

    Both halves share the model's modules (no copies); `end(front(x)) == model(x)`. Each half is in the model's
    mode (a new container is in training mode): a caller that saves a half's mode and restores it afterwards
    (`half.train(was)`) leaves the model's stages as they were.
    """
    check_point(model, point)
    k = model.stage_names.index(point) + 1
    front = nn.Sequential(*[model.stage(n) for n in model.stage_names[:k]])
    end = nn.Sequential(*[model.stage(n) for n in model.stage_names[k:]])
    front.training = end.training = model.training
    return front, end
