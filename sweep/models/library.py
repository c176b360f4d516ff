"""Networks named from a library: a donor `arch` `torchvision:<name>` or `timm:<name>`, built by the
library's own constructor (random initialisation: nothing is downloaded), traced with torch.fx and cut into
one stage per cut point (`sweep.models.graph_cut`), so that every part of the engine reads it as a `StagedNet`.

Input adaptation. Trained here from scratch (`build`): the network's first convolution is replaced by one
taking the dataset's channels (kernel, stride, padding and bias as before) and the images are resized
(bilinear) to `input_size`: the side as it is when at least 32 px, else 32 px; for a network of fixed input
size (ViTs, DeiTs) built for that side, rounded up to a multiple of its patch size. Loaded from a checkpoint in
the library's own layout (`load_checkpoint`): built as it was trained (its classes, its 3 channels, its input
size for a fixed-size network), with the library's normalisation first (or the donor's `mean`/`std`), grey
images repeated to 3 channels; classes or channels that do not fit the data are refused in one line.

The points: every cut point of the traced graph (a node where one tensor crosses); `stitch_points: all` is
a default set: timm's `feature_info` modules (every block for ViTs), torchvision's children of `features`
(ConvNeXt, MobileNet, EfficientNet, VGG, DenseNet), of `encoder.layers` (ViT), its residual stages
`layer1`-`layer4` (ResNets), else the top-level children; each read at the last node of the module.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from importlib.metadata import version

import torch
from torch import nn
from torch.nn import functional as F

from sweep.models import graph_cut
from sweep.models.base import Normalize, StagedNet
from sweep.models.declared import Architecture
from sweep.registry import LIBRARIES, UnknownName, did_you_mean, library_version

MIN_SIZE = 32
IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))


def library_of(arch: str) -> tuple[str, str] | None:
    """(library, model name) of a library arch (`timm:resnet50`), None for any other."""
    library, sep, name = arch.partition(":")
    return (library, name) if sep and library in LIBRARIES else None


@functools.cache
def model_names(library: str) -> tuple[str, ...]:
    """Every classification model the library's constructor builds by name."""
    if library == "timm":
        import timm

        return tuple(timm.list_models())
    import torchvision

    return tuple(torchvision.models.list_models(module=torchvision.models))


class LibraryArchitecture(Architecture):
    """A library network's registry entry: its points are measured on a built network (not in `table.json`)."""

    def graph_nodes(self) -> list[str]:
        """The node names of the library's own traced graph (its tracer: `graph_nodes_of`), what
        `read_nodes` reads."""
        return list(graph_nodes_of(self.name))

    def point_hint(self, point: str, valid: list[str]) -> str:
        """Why `point` is no point, with the nearest valid ones: a node inside a block, or a misspelling."""
        nodes = list(graph_nodes_of(self.name))
        module = next((m for m in valid if graph_nodes_of(self.name) and point.startswith(m + ".")), None)
        if module is not None and point not in valid and _last_node(nodes, module) == point:
            return f"the output of module {module!r} is named by the module: {module!r}"
        if point not in nodes:
            return did_you_mean(point, [*valid, *nodes])
        cuts = [n for n in nodes if n in valid]
        before = [n for n in cuts if nodes.index(n) < nodes.index(point)][-1:]
        after = [n for n in cuts if nodes.index(n) > nodes.index(point)][:1]
        return f"more than one tensor crosses after {point}; the nearest valid points: {', '.join(before + after)}"


def _last_node(nodes: list[str], module: str) -> str | None:
    inside = [n for n in nodes if n == module or n.startswith(module + ".")]
    return inside[-1] if inside else None


def entry(arch: str) -> LibraryArchitecture:
    """The registry entry of `torchvision:<name>` or `timm:<name>` (`ARCHITECTURES.prefix`); an unknown model
    name raises `UnknownName` in one line, with did-you-mean against the library's own list."""
    library, name = library_of(arch) or (arch.partition(":")[0], "")
    names = model_names(library)
    if name not in names:
        hint = did_you_mean(name, names)
        raise UnknownName(
            f"unknown {library} model {name!r} ({library} {version(library)})" + (f"; {hint}" if hint else "")
        )
    build_fn = functools.partial(build, arch)
    return LibraryArchitecture(arch, build_fn, f"{library} {version(library)}'s {name}, cut at traced-graph nodes")


def _patch(library: str, name: str) -> int:
    found = re.search(r"patch(\d+)", name) if library == "timm" else re.search(r"^vit_\w_(\d+)$", name)
    return int(found.group(1)) if found else 16


def fixed_size(library: str, name: str) -> bool:
    """Whether the network is built for one input size (its position embeddings): ViTs, DeiTs."""
    if library == "torchvision":
        return name.startswith("vit_")
    import timm

    cfg = timm.models.get_pretrained_cfg(name)
    return bool(cfg and getattr(cfg, "fixed_input_size", False))


def input_size(arch: str, image_size: int) -> int:
    """The side the network reads, trained here: the images' side when >= 32 px, else 32; a fixed-size
    network's rounded up to a multiple of its patch size."""
    library, name = library_of(arch)
    side = max(image_size, MIN_SIZE)
    if fixed_size(library, name):
        patch = _patch(library, name)
        side = math.ceil(side / patch) * patch
    return side


def construct(arch: str, num_classes: int, size: int | None) -> nn.Module:
    """The library's own network, randomly initialised (`size`: the input side of a fixed-size network;
    None: the library's default)."""
    library, name = library_of(arch)
    fixed = size is not None and fixed_size(library, name)
    if library == "timm":
        import timm

        return timm.create_model(
            name, pretrained=False, num_classes=num_classes, **({"img_size": size} if fixed else {})
        )
    import torchvision

    return torchvision.models.get_model(
        name, weights=None, num_classes=num_classes, **({"image_size": size} if fixed else {})
    )


def tracer_kwargs(arch: str) -> dict:
    """The tracer arguments of the library's own feature extraction: timm's leaf modules and functions."""
    if library_of(arch)[0] != "timm":
        return {}
    from timm.models._features_fx import get_notrace_functions, get_notrace_modules

    return {"leaf_modules": list(get_notrace_modules()), "autowrap_functions": list(get_notrace_functions())}


def first_conv(traced: graph_cut.Traced) -> str:
    """The qualified name of the first convolution the traced graph runs (the one reading the images)."""
    for node in traced.nodes:
        if node.op == "call_module" and isinstance(traced.module.get_submodule(node.target), nn.Conv2d):
            return node.target
    raise ValueError("it has no Conv2d reading its input")


def replace_conv(model: nn.Module, target: str, in_channels: int) -> None:
    old = model.get_submodule(target)
    new = nn.Conv2d(
        in_channels, old.out_channels, old.kernel_size, old.stride, old.padding, old.dilation, 1, old.bias is not None
    )
    parent, _, leaf = target.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, leaf, new)


class InputAdapter(nn.Module):
    """The first stage: grey images repeated to the network's channels, resized to its side, normalised."""

    def __init__(self, mean, std, channels: int, size: int) -> None:
        super().__init__()
        self.channels, self.size = channels, size
        self.normalize = Normalize(tuple(mean), tuple(std))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] != self.channels:
            x = x.expand(-1, self.channels, -1, -1)
        if tuple(x.shape[-2:]) != (self.size, self.size):
            x = F.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False)
        return self.normalize(x)


def default_modules(arch: str, model: nn.Module) -> list[str]:
    """The modules whose outputs `stitch_points: all` selects (the module docstring says which)."""
    if library_of(arch)[0] == "timm" and getattr(model, "feature_info", None):
        return [info["module"] for info in model.feature_info]
    for parent in ("features", "encoder.layers"):
        try:
            children = model.get_submodule(parent).named_children()
        except AttributeError:
            continue
        return [f"{parent}.{name}" for name, _ in children]
    stages = [f"layer{k}" for k in range(1, 5) if hasattr(model, f"layer{k}")]
    return stages or [name for name, _ in model.named_children()][:-1]


def trace(arch: str, model: nn.Module) -> graph_cut.Traced:
    """`model` traced with its library's tracer; a network torch.fx cannot trace is refused in one line."""
    try:
        return graph_cut.trace(model, tracer_kwargs(arch))
    except Exception as exc:
        first = (str(exc).splitlines() or [""])[0]
        raise ValueError(f"{arch}: torch.fx cannot trace it ({type(exc).__name__}: {first})") from exc


def nhwc_point(model: nn.Module, traced: graph_cut.Traced, nodes: list[str]) -> str | None:
    """The first of `nodes` whose output is a channels-last map: the feature maps of a timm model whose
    `output_fmt` is NHWC (Swin), any stage of torchvision's Swin."""
    if getattr(model, "output_fmt", "NCHW") != "NHWC" and type(model).__name__ != "SwinTransformer":
        return None
    shapes = {n: getattr(traced.named(n).meta.get("tensor_meta"), "shape", ()) for n in nodes}
    return next((n for n in nodes if len(shapes[n]) == 4), None)


def staged(arch: str, model: nn.Module, adapter: InputAdapter, in_channels: int, size: int) -> StagedNet:
    """`model` (input convolution already fitted) traced and cut into a `StagedNet` after `adapter`: its
    default points are `stitch_points`, every other cut point is an extra point."""
    traced = trace(arch, model)
    cuts = graph_cut.cut_points(traced, torch.zeros(2, in_channels, size, size))
    # a default point is named by its module (`layer2`: the residual stage's output), the others by their node
    by_module = {graph_cut.module_output(traced, m): m for m in default_modules(arch, model)}
    channels_last = nhwc_point(model, traced, list(by_module))
    if channels_last is not None:
        point = by_module[channels_last]
        raise ValueError(f"{arch}: its point {point!r} is channels-last (NHWC), neither NCHW maps nor tokens")
    named = {c: by_module.get(c, c) for c in cuts}
    stages = [("adapt_input", adapter), *((named[n], piece) for n, piece in graph_cut.pieces(traced, cuts))]
    net = StagedNet(stages, [named[c] for c in cuts if c in by_module])
    net.extra_points = [c for c in cuts if c not in by_module]
    net.library = f"{library_version(arch)} {arch}"  # in its activations' cache key (`sweep.worker.zoo`)
    net.eval()
    return net


def build(arch: str, *, in_channels: int, num_classes: int, mean, std, image_size: int) -> StagedNet:
    """The library network trained here from scratch on `in_channels` x `image_size` px images."""
    size = input_size(arch, image_size)
    model = construct(arch, num_classes, size).eval()
    if in_channels != 3:
        replace_conv(model, first_conv(trace(arch, model)), in_channels)
    return staged(arch, model, InputAdapter(mean, std, in_channels, size), in_channels, size)


@functools.cache
def graph_nodes_of(arch: str) -> tuple[str, ...]:
    """Every node name of the library network's traced graph (what the similarity kind may name)."""
    traced = trace(arch, construct(arch, 10, input_size(arch, MIN_SIZE)))
    return tuple(traced.names[n] for n in traced.nodes if n.op not in ("placeholder", "output"))


def read_nodes(net: StagedNet, points: tuple[str, ...], reduce) -> Callable:
    """A function x -> [reduce(the activation at each traced-graph node of `points`)] of a library network:
    its pieces run node by node (`graph_cut.NodeReader`), each value reduced as soon as it is computed; the
    pieces after the last one that holds a point are not run."""
    wanted = set(points)

    def read(x: torch.Tensor) -> list[torch.Tensor]:
        found: dict = {}
        x = net.stage(net.stage_names[0])(x)  # the input adapter
        for name in net.stage_names[1:]:
            x = graph_cut.NodeReader(net.stage(name), wanted, found, reduce).run(x)
            if len(found) == len(wanted):
                break
        missing = [p for p in points if p not in found]
        if missing:
            raise ValueError(f"no node {missing[0]!r} in the traced graph of {net.library}")
        return [found[p] for p in points]

    return read


def normalisation(arch: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The statistics the library's pretrained weights expect (timm: the model's pretrained config)."""
    library, name = library_of(arch)
    if library == "timm":
        import timm

        cfg = timm.models.get_pretrained_cfg(name)
        if cfg is not None and cfg.mean and cfg.std:
            return tuple(cfg.mean), tuple(cfg.std)
    return IMAGENET


def _shape_of(sd: dict, target: str, dim: int, source: str) -> int:
    key = f"{target}.weight"
    if key not in sd:
        raise ValueError(f"{source}: no {key!r} in the checkpoint: not the library's own layout for this network")
    return int(sd[key].shape[dim])


def from_library_state_dict(
    sd: dict, arch: str, source: str, in_channels: int, num_classes: int, image_size: int, mean=None, std=None
) -> StagedNet:
    """A checkpoint in the library's own layout, built as it was trained (its classes and channels, the
    library's normalisation unless `mean`/`std` are given: a `file:` donor's default, 0 and 1, is not), refused
    in one line where it misfits the data (`source`: the file, named in the message)."""
    library, name = library_of(arch)
    probe = construct(arch, 1000, None).eval()
    traced = trace(arch, probe)
    linear = [n.target for n in traced.nodes if n.op == "call_module"]
    linear = [t for t in linear if isinstance(probe.get_submodule(t), (nn.Linear, nn.Conv2d))][-1]
    channels = _shape_of(sd, first_conv(traced), 1, source)
    classes = _shape_of(sd, linear, 0, source)
    if classes != num_classes:
        raise ValueError(f"{source}: the checkpoint has {classes} classes, the data {num_classes}")
    if channels != in_channels and not (channels == 3 and in_channels == 1):
        raise ValueError(f"{source}: the checkpoint reads {channels} channels, the data has {in_channels}")
    model = construct(arch, classes, None)
    if channels != 3:
        replace_conv(model, first_conv(traced), channels)
    try:
        model.load_state_dict(sd)
    except RuntimeError as exc:
        raise ValueError(f"{source}: not {arch}'s layout ({' '.join(str(exc).split())[:300]})") from exc
    size = _checkpoint_size(library, name, model, image_size)
    if mean is None or std is None or (tuple(mean) == (0.0,) and tuple(std) == (1.0,)):
        mean, std = normalisation(arch)
    mean, std = (tuple(v) * channels if len(v) == 1 else tuple(v) for v in (mean, std))
    return staged(arch, model.eval(), InputAdapter(mean, std, channels, size), channels, size)


def _checkpoint_size(library: str, name: str, model: nn.Module, image_size: int) -> int:
    """The side a checkpoint's network reads: its own for a fixed-size network, else the images' (32 at least)."""
    if not fixed_size(library, name):
        return max(image_size, MIN_SIZE)
    if library == "timm":
        return int(model.patch_embed.img_size[0])
    return int(model.image_size)
