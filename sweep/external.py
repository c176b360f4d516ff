"""Donors from outside the zoo: a user's checkpoint file (`file:` donors), mapped onto our architectures.

A checkpoint is a PyTorch state dict (optionally wrapped as {"state_dict": ...}, {"model": ...} or
{"net": ...}, optionally with DataParallel's "module." prefixes). Its keys may be in our own layout or in
the common CIFAR layout of kuangliu/pytorch-cifar (conv1, bn1, layer1.0..., linear), which is also the layout
of AutoAttack's example ResNet-18 and of several RobustBench models; anything else is refused with the first
missing and unexpected keys named.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from .models import Normalize, StagedNet, build

WRAPPERS = ("state_dict", "model", "net", "model_state_dict")


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """Load a state dict from `path`, unwrapping the usual containers."""
    obj = torch.load(path, map_location="cpu", weights_only=True)
    for key in WRAPPERS:
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ValueError(f"{path}: expected a state dict of tensors, found {type(obj).__name__}")
    return {k.removeprefix("module."): v for k, v in obj.items()}


_CIFAR_LAYOUT = [
    (re.compile(r"^conv1\."), "stages.stem.1."),
    (re.compile(r"^bn1\."), "stages.stem.2."),
    (re.compile(r"^bn\."), "stages.head.bn."),  # pre-activation nets: the final BN
    (re.compile(r"^layer(\d+)\.(\d+)\."), r"stages.layer\1_\2."),
    (re.compile(r"^linear\."), "stages.head.fc."),
]


def _from_cifar_layout(sd: dict[str, torch.Tensor], expected: set[str]) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in sd.items():
        for pattern, repl in _CIFAR_LAYOUT:
            key = pattern.sub(repl, key)
        # kuangliu's pre-activation shortcut is Sequential(conv); ours is the bare conv
        if key not in expected and ".shortcut.0." in key:
            key = key.replace(".shortcut.0.", ".shortcut.")
        out[key] = value
    return out


def _normalisation_keys(model: StagedNet) -> set[str]:
    """The buffers of our `Normalize` stage: set from the donor spec, never read from a checkpoint."""
    return {f"{name}.{b}" for name, m in model.named_modules() if isinstance(m, Normalize) for b in ("mean", "std")}


def load_checkpoint(path: str | Path, arch: str, *, in_channels: int, num_classes: int, mean, std,
                    image_size: int) -> StagedNet:
    """Build `arch` and fill it from the checkpoint at `path` (eval mode). Normalisation comes from
    `mean`/`std`: the statistics the checkpoint's weights expect their inputs to be normalised with."""
    model = build(arch, in_channels, num_classes, mean, std, image_size=image_size)
    ours = model.state_dict()
    own = _normalisation_keys(model)
    expected = set(ours) - own
    raw = read_state_dict(path)
    best, best_score = None, -1
    for candidate in (raw, _from_cifar_layout(raw, expected)):
        keys = set(candidate) - own
        if keys == expected and all(candidate[k].shape == ours[k].shape for k in expected):
            model.load_state_dict({**{k: ours[k] for k in own}, **{k: candidate[k] for k in expected}})
            return model.eval()
        score = len(keys & expected)
        if score > best_score:
            best, best_score = candidate, score
    missing = sorted(expected - set(best))[:3]
    unexpected = sorted(set(best) - expected - own)[:3]
    wrong = [k for k in sorted(expected & set(best)) if best[k].shape != ours[k].shape][:3]
    detail = "; ".join(part for part in (
        f"missing keys {missing}" if missing else "",
        f"unexpected keys {unexpected}" if unexpected else "",
        f"shape mismatch at {[(k, tuple(best[k].shape), tuple(ours[k].shape)) for k in wrong]}" if wrong else "",
    ) if part)
    raise ValueError(f"{path}: the checkpoint does not fit architecture {arch!r} ({in_channels} input channels,"
                     f" {num_classes} classes): {detail}")
