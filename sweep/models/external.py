"""Donors from outside the zoo: a user's checkpoint file (`file:` donors), mapped onto our architectures.

Input normalisation comes from the donor spec (`mean`, `std`), unless the checkpoint carries its own
buffers (`mu` / `sigma`), which then win.

A checkpoint is a PyTorch state dict or a `.safetensors` file (a dict: optionally wrapped as {"state_dict": ...},
{"model": ...} or {"net": ...}, with DataParallel's "module." prefixes or none). Its keys may be in our own layout or
in the common CIFAR layout of kuangliu/pytorch-cifar (conv1, bn1, layer1.0..., linear), which is also the layout
of AutoAttack's example ResNet-18 and of several RobustBench models, or DeepMind's layout of RobustBench's
DMPreActResNet / DMWideResNet (onto `dm_preact_resnet18` / `dm_wrn28_10`), or torchvision's (onto the `tv_*`
networks), or timm's ViT layout (`vit_tiny_patch16_224`, DeiT-Ti: onto `vit_ti_16`); anything else is refused
with the first missing and unexpected keys named. A torchvision or timm checkpoint, once mapped, must compute
what that library's own network computes with it (checked when the library is installed).
"""

from __future__ import annotations

import re
from pathlib import Path

import torch
from safetensors.torch import load_file

from sweep.models.base import Normalize, StagedNet, build
from sweep.models.vit import TIMM_VITS
from sweep.registry import library_version

WRAPPERS = ("state_dict", "model", "net", "model_state_dict")


def read_state_dict(path: str | Path, trust_pickle: bool = False) -> dict[str, torch.Tensor]:
    """Load a state dict from `path`, unwrapping the usual containers. Read with `weights_only` (tensors, containers
    and plain values: what the robustness library's training loop saves, though it pickles with dill); a file
    that holds other pickled objects is refused, naming the opt-in, unless `trust_pickle` (a donor's
    `trust_pickle: true`), which unpickles it in full and so runs whatever code the file names."""
    import pickle

    try:
        safe = Path(path).suffix == ".safetensors"  # tensors only (`safetensors.torch.load_file`): nothing to unpickle
        obj = load_file(path) if safe else torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if "Unsupported global" not in str(exc):  # not a refused object: a corrupt or foreign file
            raise
        if not trust_pickle:
            first = next(line.strip() for line in str(exc).splitlines() if "Unsupported global" in line)
            raise ValueError(
                f"{path}: holds pickled objects besides tensors, which loading with weights_only refuses ({first});"
                " if you trust the file, set `trust_pickle: true` on the donor (unpickling runs the file's code)"
            ) from None
        obj = torch.load(path, map_location="cpu", weights_only=False)
    for key in WRAPPERS:
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ValueError(f"{path}: expected a state dict of tensors, found {type(obj).__name__}")
    return {k.removeprefix("module."): v for k, v in obj.items()}


# DeepMind's layouts (RobustBench's DMPreActResNet and DMWideResNet) onto dm_preact_resnet18 / dm_wrn28_10
_DM_LAYOUT = [
    (re.compile(r"^(conv_2d|init_conv)\."), "stages.stem.1."),
    (re.compile(r"^layer_(\d+)\.(\d+)\."), lambda m: f"stages.layer{int(m[1]) + 1}_{m[2]}."),
    (re.compile(r"^layer\.(\d+)\.block\.(\d+)\."), lambda m: f"stages.layer{int(m[1]) + 1}_{m[2]}."),
    (re.compile(r"\.batchnorm_0\."), ".bn1."),
    (re.compile(r"\.(conv_2d_1|conv_0)\."), ".conv1."),
    (re.compile(r"\.batchnorm_1\."), ".bn2."),
    (re.compile(r"\.(conv_2d_2|conv_1)\."), ".conv2."),
    (re.compile(r"^batchnorm\."), "stages.head.bn."),
    (re.compile(r"^logits\."), "stages.head.fc."),
]

# timm's VisionTransformer (vit_tiny_patch16_224, DeiT-Ti) onto vit.py's networks
_TIMM_VIT_LAYOUT = [
    (re.compile(r"^patch_embed\.proj\."), "stages.embed.proj."),
    (re.compile(r"^(cls_token|pos_embed)$"), r"stages.embed.\1"),
    (re.compile(r"^blocks\.(\d+)\.attn\.qkv\.(weight|bias)$"), r"stages.blocks_\1.attn.in_proj_\2"),
    (re.compile(r"^blocks\.(\d+)\.attn\.proj\."), r"stages.blocks_\1.attn.out_proj."),
    (re.compile(r"^blocks\.(\d+)\.mlp\.fc1\."), r"stages.blocks_\1.mlp.0."),
    (re.compile(r"^blocks\.(\d+)\.mlp\.fc2\."), r"stages.blocks_\1.mlp.2."),
    (re.compile(r"^blocks\.(\d+)\."), r"stages.blocks_\1."),
    (re.compile(r"^norm\."), "stages.head.norm."),
    (re.compile(r"^head\."), "stages.head.fc."),
]

_CIFAR_LAYOUT = [
    (re.compile(r"^conv1\."), "stages.stem.1."),
    (re.compile(r"^bn1\."), "stages.stem.2."),
    (re.compile(r"^bn\."), "stages.head.bn."),  # pre-activation nets: the final BN
    (re.compile(r"^layer(\d+)\.(\d+)\."), r"stages.layer\1_\2."),
    (re.compile(r"^linear\."), "stages.head.fc."),
]


def _from_cifar_layout(sd: dict[str, torch.Tensor], expected: set[str], own: set[str]) -> dict[str, torch.Tensor]:
    out = {}
    # input normalisation stored as `mu` / `sigma` buffers (e.g. RobustBench's Engstrom2019Robustness)
    names = {
        "mu": next((k for k in sorted(own) if k.endswith(".mean")), "mu"),
        "sigma": next((k for k in sorted(own) if k.endswith(".std")), "sigma"),
    }
    for key, value in sd.items():
        if key in names:
            out[names[key]] = value
            continue
        for pattern, repl in _CIFAR_LAYOUT:
            key = pattern.sub(repl, key)
        # kuangliu's pre-activation shortcut is Sequential(conv); ours is the bare conv
        if key not in expected and ".shortcut.0." in key:
            key = key.replace(".shortcut.0.", ".shortcut.")
        out[key] = value
    return out


def _from_torchvision_layout(sd: dict[str, torch.Tensor], ours: dict, own: set[str]) -> dict[str, torch.Tensor]:
    """torchvision's keys onto a network whose stages keep torchvision's module names (`imagenet_tv.py`): the
    stage prefix added back. Salman et al. 2020's robustness-library checkpoints too: `model.` + torchvision's
    keys, the `attacker.` copy dropped, the normaliser's `new_mean` / `new_std` as our normalisation."""
    strip: dict[str, list[str]] = {}
    for key in ours:
        parts = key.split(".", 2)
        if key not in own and len(parts) == 3:
            strip.setdefault(parts[2], []).append(key)
    if not strip or any(len(v) > 1 for v in strip.values()):
        return {}  # module names repeat across stages: not such a network
    norm = {
        "normalizer.new_mean": next((k for k in sorted(own) if k.endswith(".mean")), None),
        "normalizer.new_std": next((k for k in sorted(own) if k.endswith(".std")), None),
    }
    out = {}
    for key, value in sd.items():
        if key.startswith("attacker."):
            continue
        key = key.removeprefix("model.")
        if norm.get(key):
            out[norm[key]] = value.reshape(ours[norm[key]].shape)
        else:
            out[strip[key][0] if key in strip else key] = value
    return out


def _rename(key: str, rules) -> str:
    for pattern, repl in rules:
        key = pattern.sub(repl, key)
    return key


def _normalisation_keys(model: StagedNet) -> set[str]:
    """The buffers of our `Normalize` stage: set from the donor spec, never read from a checkpoint."""
    return {f"{name}.{b}" for name, m in model.named_modules() if isinstance(m, Normalize) for b in ("mean", "std")}


def load_checkpoint(
    path: str | Path,
    arch: str,
    *,
    in_channels: int,
    num_classes: int,
    mean,
    std,
    image_size: int,
    trust_pickle: bool = False,
) -> StagedNet:
    """Build `arch` and fill it from the checkpoint at `path` (eval mode). Normalisation comes from
    `mean`/`std`: the statistics the checkpoint's weights expect their inputs to be normalised with (a
    library network's, `torchvision:<name>`, in the library's own layout: its library's unless given)."""
    if library_version(arch):
        from sweep.models.library import from_library_state_dict

        sd = read_state_dict(path, trust_pickle)
        return from_library_state_dict(sd, arch, str(path), in_channels, num_classes, image_size, mean, std)
    return from_state_dict(
        read_state_dict(path, trust_pickle),
        arch,
        source=str(path),
        in_channels=in_channels,
        num_classes=num_classes,
        mean=mean,
        std=std,
        image_size=image_size,
    )


def from_state_dict(
    raw: dict[str, torch.Tensor],
    arch: str,
    *,
    source: str,
    in_channels: int,
    num_classes: int,
    mean,
    std,
    image_size: int,
) -> StagedNet:
    """Build `arch` and fill it from a state dict in our layout or the CIFAR layout (eval mode)."""
    model = build(arch, in_channels, num_classes, mean, std, image_size=image_size)
    ours = model.state_dict()
    own = _normalisation_keys(model)
    expected = set(ours) - own
    best, best_score = None, -1
    dm = {_rename(k, _DM_LAYOUT): v for k, v in raw.items()}
    tv = _from_torchvision_layout(raw, ours, own)
    timm = {_rename(k, _TIMM_VIT_LAYOUT): v for k, v in raw.items()} if arch in TIMM_VITS else {}
    for candidate in (raw, _from_cifar_layout(raw, expected, own), dm, tv, timm):
        keys = set(candidate) - own
        if keys == expected and all(candidate[k].shape == ours[k].shape for k in set(candidate) & set(ours)):
            # normalisation: the checkpoint's own buffers when it has them, else the donor spec's
            model.load_state_dict({**ours, **candidate})
            if candidate is tv:
                _check_torchvision(model.eval(), arch, num_classes, in_channels, image_size, source)
            if candidate is timm:
                _check_timm(model.eval(), raw, num_classes, in_channels, image_size, source)
            return model.eval()
        score = len(keys & expected)
        if score > best_score:
            best, best_score = candidate, score
    missing = sorted(expected - set(best))[:3]
    unexpected = sorted(set(best) - expected - own)[:3]
    wrong = [k for k in sorted(expected & set(best)) if best[k].shape != ours[k].shape][:3]
    detail = "; ".join(
        part
        for part in (
            f"missing keys {missing}" if missing else "",
            f"unexpected keys {unexpected}" if unexpected else "",
            f"shape mismatch at {[(k, tuple(best[k].shape), tuple(ours[k].shape)) for k in wrong]}" if wrong else "",
        )
        if part
    )
    raise ValueError(
        f"{source}: the checkpoint does not fit architecture {arch!r} ({in_channels} input channels,"
        f" {num_classes} classes): {detail}"
    )


def _check_torchvision(model: StagedNet, arch: str, num_classes: int, in_channels: int, size: int, source: str):
    """A checkpoint mapped by the stage prefix must compute what torchvision's network with it computes."""
    from sweep.models.imagenet_tv import REFERENCES, reference

    if arch not in REFERENCES or in_channels != 3:
        return
    state = model.state_dict()
    reference = reference(arch, num_classes).eval()
    names = set(reference.state_dict())
    stripped = {key.split(".", 2)[-1]: value for key, value in state.items()}
    reference.load_state_dict({k: v for k, v in stripped.items() if k in names})
    norm = next(m for m in model.modules() if isinstance(m, Normalize))
    x = torch.rand(2, 3, size, size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        gap = (model(x) - reference(norm(x))).abs().max().item()
    if gap > 1e-4:
        raise ValueError(f"{source}: mapped onto {arch!r} it differs from torchvision's network (gap {gap:.3g})")


def _check_timm(model: StagedNet, raw: dict, num_classes: int, in_channels: int, size: int, source: str):
    """A checkpoint in timm's ViT layout must compute what timm's VisionTransformer computes with it (skipped
    when timm is not installed; RobustBench brings it). The head count is the architecture's (3 for ViT-Ti
    and DeiT-Ti): a state dict cannot tell it, so a checkpoint trained with other heads is not caught here."""
    try:
        from timm.models.vision_transformer import VisionTransformer
    except ImportError:
        return
    dim = raw["cls_token"].shape[-1]
    depth = 1 + max(int(k.split(".")[1]) for k in raw if k.startswith("blocks."))
    heads = next(m for m in model.modules() if isinstance(m, torch.nn.MultiheadAttention)).num_heads
    patch = raw["patch_embed.proj.weight"].shape[-1]
    reference = VisionTransformer(
        img_size=size, patch_size=patch, in_chans=in_channels, num_classes=num_classes, embed_dim=dim,
        depth=depth, num_heads=heads,
    )  # fmt: skip
    reference.load_state_dict(raw)
    norm = next(m for m in model.modules() if isinstance(m, Normalize))
    x = torch.rand(2, in_channels, size, size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        gap = (model(x) - reference.eval()(norm(x))).abs().max().item()
    if gap > 1e-4:
        raise ValueError(f"{source}: mapped from timm's layout it differs from timm's network (gap {gap:.3g})")


# ------------------------------------------------------------------------------------------- RobustBench


def robustbench_models(dataset: str, threat_model: str) -> list[str]:
    """The model names RobustBench lists for a dataset and threat model."""
    _import_robustbench()
    from robustbench.model_zoo import model_dicts
    from robustbench.model_zoo.enums import BenchmarkDataset, ThreatModel

    return sorted(model_dicts[BenchmarkDataset(dataset)][ThreatModel(threat_model)])


def _import_robustbench():
    """Import robustbench. It imports AutoAttack as `autoattack`; the official code on PyPI installs as
    `pyautoattack` (same code), so that name is aliased first. RobustBench only needs it for benchmarking."""
    import sys
    import warnings

    import pyautoattack

    sys.modules.setdefault("autoattack", pyautoattack)
    with warnings.catch_warnings():  # its own and timm's deprecation notices: nothing a user can act on
        warnings.simplefilter("ignore")
        import robustbench.utils

    return robustbench.utils


def load_robustbench(
    model_id: str, arch: str, model_dir: str | Path, *, in_channels: int, num_classes: int, image_size: int
) -> StagedNet:
    """Load `dataset/threat_model/name` with RobustBench's own loader from `model_dir` (it downloads into it
    when the checkpoint is missing) and map it onto `arch`; the mapped network must compute what
    RobustBench's does, or this raises."""
    dataset, threat, name = model_id.split("/")
    utils = _import_robustbench()
    reference = utils.load_model(model_name=name, model_dir=str(model_dir), dataset=dataset, threat_model=threat).eval()
    # Some models normalise with constants kept out of their state dict (non-persistent buffers).
    mean, std = getattr(reference, "mean", None), getattr(reference, "std", None)
    if isinstance(mean, torch.Tensor) and isinstance(std, torch.Tensor):
        mean, std = tuple(mean.flatten().tolist()), tuple(std.flatten().tolist())
    else:
        mean, std = (0.0,), (1.0,)
    model = from_state_dict(
        reference.state_dict(),
        arch,
        source=f"robustbench:{model_id}",
        in_channels=in_channels,
        num_classes=num_classes,
        mean=mean,
        std=std,
        image_size=image_size,
    )
    x = torch.rand(4, in_channels, image_size, image_size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        gap = (model(x) - reference(x)).abs().max().item()
    if gap > 1e-4:
        raise ValueError(
            f"robustbench:{model_id}: mapped onto {arch!r} it computes something else (max logit"
            f" difference {gap:.3g}); the model may normalise its inputs or differ in structure"
        )
    return model


def build_file_donor(donor, splits, device, progress=None, workdir=None):
    """The `file:` donor source: the checkpoint mapped onto its architecture, with the normalisation it names."""
    model = load_checkpoint(
        donor.path,
        donor.arch,
        in_channels=splits.in_channels,
        num_classes=splits.num_classes,
        mean=donor.mean,
        std=donor.std,
        image_size=splits.image_size,
        trust_pickle=donor.trust_pickle,
    )
    return model, donor.mean, donor.std


def build_robustbench_donor(donor, splits, device, progress=None, workdir=None):
    """The `robustbench:` donor source: RobustBench's model, mapped (its normalisation is inside the model)."""
    model = load_robustbench(
        donor.robustbench_id,
        donor.arch,
        donor.path,
        in_channels=splits.in_channels,
        num_classes=splits.num_classes,
        image_size=splits.image_size,
    )
    return model, (0.0,), (1.0,)


SALMAN_URL = "https://huggingface.co/madrylab/robust-imagenet-models/resolve/main/{name}.ckpt"


def build_salman_donor(donor, splits, device, progress=None, workdir=None):
    """The `salman:` donor source: `<model_dir>/<name>.ckpt` (downloaded there once from the authors' mirror
    when missing), in the robustness library's layout, mapped and checked against torchvision's network; its
    own normaliser sets the normalisation."""
    path = Path(donor.path) / f"{donor.salman_id}.ckpt"
    if not path.is_file():
        from torch.hub import download_url_to_file

        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            download_url_to_file(SALMAN_URL.format(name=donor.salman_id), str(path))
        except Exception as exc:
            raise FileNotFoundError(
                f"{path}: missing, and downloading it failed ({type(exc).__name__}: {exc}); put Salman et al.'s"
                f" {donor.salman_id}.ckpt there"
            ) from None
    model = load_checkpoint(
        path,
        donor.arch,
        in_channels=splits.in_channels,
        num_classes=splits.num_classes,
        mean=(0.485, 0.456, 0.406),
        std=(0.229, 0.224, 0.225),
        image_size=splits.image_size,
        trust_pickle=donor.trust_pickle,
    )
    norm = next(m for m in model.modules() if isinstance(m, Normalize))
    return model, tuple(norm.mean.flatten().tolist()), tuple(norm.std.flatten().tolist())
