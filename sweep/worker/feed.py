"""The donor stage's pass over a donor's test images: the logits its evaluation reads and, in the same pass, the
frozen halves f<=i that the sweep's trials read on those images, written where a trial's lookup finds them (the
node's cache files, one per chunk, and the worker's memory: `sweep.worker.activations`).

The pass runs the donor's stages in order on the fixed chunk grid (`CHUNK` images; on the CPU in passes of
`CPU_BATCH` images from each chunk's start, as `sweep.train.evaluate.activations` does) and records the output of
each stage that ends a wanted point: the very operations `compute(split(model, point)[0], chunk)` runs, on the
same batches, into tensors laid out as it lays them out, so each chunk is bit for bit what a trial computing its
front itself gets; the logits are those of `compute(model, chunk)`. A part larger than the worker's memory budget
is not filled (a trial does not cache it either)."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import torch

from sweep.data.core import Splits
from sweep.data.stream import chunks
from sweep.models.base import StagedNet, check_point
from sweep.train.evaluate import inference_batch
from sweep.train.loops import autocast, to_device
from sweep.worker.activations import CHUNK, empty_part, part_key, per_image_key
from sweep.worker.cache import worker_cache

LOGITS = "logits"

Fill = tuple[Splits, str, str, bool]
"""A frozen half to fill: the trial's splits (whose test images the pass runs on), point, precision, memory
layout (channels-last)."""


def staged(
    model: StagedNet,
    x: torch.Tensor,
    device: torch.device,
    points: set[str],
    precision: str = "fp32",
    channels_last: bool = False,
    logits: bool = False,
) -> Iterator[dict[str, torch.Tensor]]:
    """Per chunk of `CHUNK` images of `x`, from the first: {point: f<=point(chunk)} for each of `points` (and
    {LOGITS: model(chunk)} with `logits`), from one pass through the stages up to the deepest one asked for."""
    names = model.stage_names
    for p in points:
        check_point(model, p)
    wanted: dict[int, list[str]] = {}
    for p in points:
        wanted.setdefault(names.index(p), []).append(p)
    if logits:
        wanted.setdefault(len(names) - 1, []).append(LOGITS)
    if not wanted:
        return
    stages = [model.stage(n) for n in names[: max(wanted) + 1]]
    batch = inference_batch(CHUNK, device)
    model.eval()
    with torch.no_grad(), autocast(device, precision):
        for start in range(0, len(x), CHUNK):
            piece = x[start : start + CHUNK]
            out: dict[str, torch.Tensor] = {}
            for i, xb in zip(range(0, len(piece), batch), chunks(piece, batch)):
                a = to_device(xb, device, channels_last)
                for depth, stage in enumerate(stages):
                    a = stage(a)
                    for label in wanted.get(depth, ()):
                        _place(out, label, a.float() if precision == "fp32" else a, i, len(piece), channels_last)
            yield out


def _place(out: dict, label: str, a: torch.Tensor, i: int, n: int, channels_last: bool) -> None:
    """Copy a pass's output into the chunk's tensor of `label`, allocated as `activations` allocates it."""
    if label not in out:
        fmt = torch.channels_last if channels_last and a.dim() == 4 else torch.contiguous_format
        out[label] = torch.empty((n, *a.shape[1:]), dtype=a.dtype, device=a.device, memory_format=fmt)
    out[label][i : i + len(a)] = a


def feed(model: StagedNet, x, device: torch.device, fills: list[Fill], logits: bool) -> torch.Tensor | None:
    """Run `model` (a zoo donor: `checkpoint_identity` names it) over `x`, once per precision and memory layout
    the fills ask for, writing each fill's activations on the test part of its splits (whose test images must
    be `x`). Returns the fp32 logits on `x` with `logits` (None otherwise). With the worker's cache off nothing
    is filled."""
    cache = worker_cache()
    groups: dict[tuple[str, bool], list[Fill]] = {}
    for f in fills if cache.settings.enabled else ():
        groups.setdefault((f[2], f[3]), []).append(f)
    if logits:
        groups.setdefault(("fp32", False), [])
    out = None
    for (precision, channels_last), group in groups.items():
        net = copy.deepcopy(model).to(memory_format=torch.channels_last) if channels_last else model
        with_logits = logits and (precision, channels_last) == ("fp32", False)
        pieces = _fill(net, x, device, group, precision, channels_last, with_logits)
        if with_logits:
            out = torch.cat(pieces) if pieces else torch.zeros(0, device=device)
    cache.flush()
    return out


def _fill(net, x, device, group: list[Fill], precision: str, channels_last: bool, logits: bool) -> list:
    """One pass for one precision and layout: each chunk of each fill written as it comes (a part that would
    exceed the memory budget is dropped at its first chunk), the kept parts into memory; returns the logits'
    chunks."""
    cache, identity = worker_cache(), tuple(net.checkpoint_identity)  # `sweep.worker.zoo.checkpoint_identity`
    points = {point for _, point, _, _ in group}
    kept: dict[str, torch.Tensor | None] = dict.fromkeys(points)  # each part, filled chunk by chunk (`empty_part`)
    logit_chunks = []
    for start, acts in zip(range(0, len(x), CHUNK), staged(net, x, device, points, precision, channels_last, logits)):
        if logits:
            logit_chunks.append(acts[LOGITS])
        for p in [p for p in kept if p in acts]:
            a = acts[p]
            if start == 0:
                per_image = a[0].numel() * a.element_size() if len(a) else 0
                cache.keep(per_image_key((*identity, p), x, precision, device), per_image)
                if per_image * len(x) > cache.settings.budget:  # a trial computes it per chunk, uncached
                    del kept[p]
                    continue
                kept[p] = a if len(a) == len(x) else empty_part(a, len(x))
            if kept[p] is not a:
                kept[p][start : start + len(a)] = a
            for splits, point, _, _ in group:
                if point == p:
                    key = part_key((*identity, p), splits, "test", precision, channels_last, device)
                    cache.store((*key, "chunk", start), a)
    for splits, p, _, _ in group:
        if kept.get(p) is not None:
            key = part_key((*identity, p), splits, "test", precision, channels_last, device)
            cache.keep(key, kept[p])
    return logit_chunks
