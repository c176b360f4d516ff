"""Frozen halves and their activations, computed once per worker (or node) and reused by every unit that
needs them: the TLM/DM fits (every epoch), clean evaluation, similarity indices and OOD detection.

A frozen half is f<=i of a front donor or g<=j of an end donor with its BatchNorm in eval mode, no input
augmentation and no attack through it: then its activations on a split's part are a pure function of (the
donor's checkpoint, the point, the split's images, the precision, the memory layout, the device kind), which
is the cache key. Per-sample outputs of the convolutions do not depend on how images are batched (checked
bitwise on CPU fp32 for the ResNets: `tests/test_cache.py`), so a trial that reads cached activations
records the same rows as one that recomputes them batch by batch.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch

from sweep.cache import worker_cache
from sweep.data.core import Splits
from sweep.train.loops import autocast, to_device

PARTS = ("train", "val", "test")


def fingerprint(splits: Splits) -> str:
    """A cheap content fingerprint of a split (its id, shapes, every label and a stride of its pixels): two
    data roots that hold different images under one dataset name never share cached activations."""
    h = hashlib.sha256(splits.split_id.encode())
    for part in PARTS:
        x, y = getattr(splits, f"{part}_x"), getattr(splits, f"{part}_y")
        h.update(repr((tuple(x.shape), str(x.dtype))).encode())
        h.update(y.cpu().numpy().tobytes())
        flat = x.reshape(-1)
        h.update(flat[:: max(1, len(flat) // 4096)].cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def compute(module, x: torch.Tensor, device: torch.device, precision: str = "fp32", channels_last: bool = False):
    """module(x) in eval mode and batches, without gradients, under the precision's autocast."""
    was = getattr(module, "training", None)
    if was is not None:
        module.eval()
    try:
        with torch.no_grad(), autocast(device, precision):
            out = [module(to_device(x[i : i + 250], device, channels_last)) for i in range(0, len(x), 250)]
    finally:
        if was is not None:
            module.train(was)
    return torch.cat(out) if out else torch.zeros(0, device=device)


@dataclass
class Frozen:
    """A frozen half on a trial's splits. `identity` names the donor's checkpoint and point (None: nothing to
    cache, e.g. a noise sender's identity front); `on(part, n)` is its activations on the first `n` images
    of a part, from the worker's cache when it is on."""

    module: torch.nn.Module
    identity: tuple | None
    splits: Splits
    device: torch.device
    channels_last: bool = False

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.module(x)

    @property
    def cached(self) -> bool:
        return self.identity is not None and worker_cache().settings.enabled

    def on(self, part: str, n: int | None = None, precision: str = "fp32") -> torch.Tensor:
        x = getattr(self.splits, f"{part}_x")
        if not self.cached:
            return compute(self.module, x[:n], self.device, precision, self.channels_last)
        key = (
            "activations",
            *self.identity,
            fingerprint_of(self.splits),
            part,
            precision,
            self.channels_last,
            self.device.type,
        )
        make = lambda: compute(self.module, x, self.device, precision, self.channels_last)  # noqa: E731
        full = worker_cache().get(key, make, disk=True, device=self.device)
        return full[:n]


def fingerprint_of(splits: Splits) -> str:
    """`fingerprint(splits)`, remembered per splits object (the worker keeps its splits)."""
    got = _FINGERPRINTS.get(id(splits))
    if got is None or got[0] is not splits:
        got = (splits, fingerprint(splits))
        _FINGERPRINTS[id(splits)] = got
        while len(_FINGERPRINTS) > 64:
            _FINGERPRINTS.pop(next(iter(_FINGERPRINTS)))
    return got[1]


_FINGERPRINTS: dict[int, tuple[Splits, str]] = {}
