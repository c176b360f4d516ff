"""Frozen halves and their activations, computed once per worker (or node) and reused by every unit that
needs them: the TLM/DM fits (every epoch), clean evaluation, similarity indices and OOD detection.

A frozen half is f<=i of a front donor or g<=j of an end donor with its BatchNorm in eval mode, no input
augmentation and no attack through it: then its activations on a split's part are a pure function of (the
donor's checkpoint, the point, the split's images, the precision, the memory layout, the device kind, the
code), which is the cache key.

Same rows with the cache on or off: the activations are always computed the same way, in fixed chunks of
`CHUNK` images from the start of the part (a prefix of n images is computed up to the end of its last
chunk, then cut; a part is filled chunk by chunk as units ask for more of it), and whether a fit trains on
them does not depend on the cache: the cache only decides whether they are kept. (A convolution's output
for one image can differ in the last bit between a batch of one and a larger batch, so the chunk grid, not
the batching of the caller, fixes the arithmetic; on the CPU each chunk goes in passes of
`sweep.train.evaluate.CPU_BATCH` images from its start.) A part whose activations would exceed the memory budget
is never materialised: the fit then recomputes the front per batch, as without this module.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from sweep.data.core import Splits, fingerprint
from sweep.train.evaluate import CPU_BATCH, activations
from sweep.worker.cache import worker_cache

CHUNK = 250


def compute(module, x: torch.Tensor, device: torch.device, precision: str = "fp32", channels_last: bool = False):
    """module(x) on the fixed grid of `CHUNK`-image chunks (`sweep.train.evaluate.activations`)."""
    return activations(module, x, device, CHUNK, precision, channels_last)


_CODE: str | None = None


def code_version() -> str:
    """What the activations' code is: torch's and stitchsweep's versions and a hash of the model sources,
    so a node's cached files never outlive an upgrade or an edit of an architecture."""
    global _CODE
    if _CODE is None:
        from sweep import __version__

        h = hashlib.sha256(f"{torch.__version__} {__version__} cpu_batch={CPU_BATCH}".encode())
        for path in sorted((Path(__file__).parent / "models").glob("*.py")):
            h.update(path.read_bytes())
        _CODE = h.hexdigest()[:12]
    return _CODE


@dataclass
class Frozen:
    """A frozen half on a trial's splits. `identity` names the donor's checkpoint and point (None: not a
    frozen donor half, e.g. a noise sender's identity front: computed directly, never kept); `on(part, n)`
    is its activations on the first `n` images of a part."""

    module: torch.nn.Module
    identity: tuple | None
    splits: Splits
    device: torch.device
    channels_last: bool = False

    @property
    def cached(self) -> bool:
        """Whether its activations come from the fixed chunk grid (and the worker's cache, when it is on)."""
        return self.identity is not None

    def fits(self, part: str, precision: str = "fp32") -> bool:
        """Whether a whole part's activations fit the worker's memory budget (probed on one image)."""
        x = getattr(self.splits, f"{part}_x")
        if self.identity is None or not len(x):
            return self.identity is not None  # an empty part "fits"; a noise sender's is never kept
        key = per_image_key(self.identity, x, precision, self.device)
        per_image = worker_cache().get(key, lambda: _per_image(self.module, x[:2], self.device, precision))
        return per_image * len(x) <= worker_cache().settings.budget

    def on(self, part: str, n: int | None = None, precision: str = "fp32") -> torch.Tensor:
        """The activations of the first `n` images of `part` (all without `n`). Only the chunks that cover them
        are computed: a fit on 100 images pays for one chunk, not the split. A kept part grows chunk by chunk
        (each chunk also a file of the node's folder) as later units ask for more of it."""
        x = getattr(self.splits, f"{part}_x")
        n = len(x) if n is None else min(n, len(x))
        end = min(len(x), math.ceil(n / CHUNK) * CHUNK) if n else min(len(x), 1)
        if self.identity is None or not len(x):  # a noise sender's front, or an empty split (`val_size: 0`)
            return compute(self.module, x[:n], self.device, precision, self.channels_last)
        if not self.fits(part, precision):  # too large to keep: the prefix asked for, on the same chunk grid
            return compute(self.module, x[:end], self.device, precision, self.channels_last)[:n]
        key = part_key(self.identity, self.splits, part, precision, self.channels_last, self.device)
        cache = worker_cache()
        have = cache.peek(key)
        if have is not None and len(have) >= end:
            return have[:n]

        def chunk(start: int) -> torch.Tensor:
            return compute(self.module, x[start : start + CHUNK], self.device, precision, self.channels_last)

        def pieces():
            if have is not None:
                yield have
            for start in range(0 if have is None else len(have), end, CHUNK):
                yield cache.on_disk((*key, "chunk", start), lambda s=start: chunk(s), device=self.device)

        prefix = filled(pieces(), end)
        cache.flush()  # each chunk's file was written while the next one was computed
        cache.keep(key, prefix)
        return prefix[:n]


def empty_part(piece: torch.Tensor, n: int) -> torch.Tensor:
    """An uninitialised tensor of `n` images shaped, typed and laid out like the chunk `piece` (channels-last where
    it is, as `torch.cat` of such chunks is), to copy a part's chunks into as they come."""
    fmt = torch.contiguous_format
    if piece.dim() == 4 and not piece.is_contiguous() and piece.is_contiguous(memory_format=torch.channels_last):
        fmt = torch.channels_last
    return torch.empty((n, *piece.shape[1:]), dtype=piece.dtype, device=piece.device, memory_format=fmt)


def filled(pieces, n: int) -> torch.Tensor:
    """The first `n` images of a part from its pieces in order (a kept prefix, then chunks: an iterator), each
    copied into one tensor as it comes and let go, so assembling a part holds the part and one chunk, not the
    chunks and their concatenation; the same values and layout as `torch.cat` of them. A first piece of all `n`
    images is the part itself."""
    out, at = None, 0
    for piece in pieces:
        if out is None:
            if len(piece) >= n:
                return piece
            out = empty_part(piece, n)
        out[at : at + len(piece)] = piece
        at += len(piece)
    if out is None or at != n:
        raise ValueError(f"a part of {n} images assembled from pieces of {at}")
    return out


def part_key(identity: tuple, splits: Splits, part: str, precision: str, channels_last: bool, device) -> tuple:
    """The cache key of a frozen half's activations on a split's part (its chunk files add ("chunk", start)):
    what `Frozen.on` reads, and what the donor stage fills (`sweep.worker.feed`)."""
    data = splits.fingerprint or fingerprint(splits)
    return ("activations", *identity, data, part, precision, channels_last, torch.device(device).type, code_version())


def per_image_key(identity: tuple, x: torch.Tensor, precision: str, device) -> tuple:
    """The cache key of a frozen half's bytes per image on images shaped like `x`'s (`Frozen.fits`)."""
    return ("bytes-per-image", *identity, tuple(x.shape[1:]), precision, torch.device(device).type)


def chunks(frozen: Frozen | None, module, x: torch.Tensor, part: str, n: int, device: torch.device):
    """The activations of the first `n` images of `part` chunk by chunk, on the fixed grid of `CHUNK` images:
    from a frozen half's kept part when the part fits the worker's memory (no copy: slices of what the worker
    keeps), else computed a chunk at a time and dropped after use, so a caller that accumulates holds one chunk.
    `frozen` None: `module` (a half that is not a frozen donor's, e.g. trained) on the images `x` of the part."""
    if frozen is not None and frozen.cached and frozen.fits(part):
        acts = frozen.on(part, n)
        for start in range(0, len(acts), CHUNK):
            yield acts[start : start + CHUNK]
        return
    if frozen is not None:
        module, x = frozen.module, getattr(frozen.splits, f"{part}_x")
    n = min(n, len(x))
    channels_last = frozen.channels_last if frozen is not None else False
    for start in range(0, n, CHUNK):
        yield compute(module, x[start : min(n, start + CHUNK)], device, "fp32", channels_last)


def _per_image(module, x: torch.Tensor, device: torch.device, precision: str) -> int:
    a = compute(module, x, device, precision)
    return a[0].numel() * a.element_size() if len(a) else 0
