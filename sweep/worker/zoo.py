"""The donors a worker loads from the zoo: a checkpoint read once per worker (the worker's cache keeps it), the
donors-table row of an evaluation, and where a donor's test predictions are kept. Every kind of work that runs
donors reads them through here; the zoo stage (`sweep.kinds.donor.run`) writes them."""

from __future__ import annotations

import copy
import hashlib

import pyarrow.fs as pafs
import torch

from sweep.config.donors import DonorEval
from sweep.models.base import StagedNet, build
from sweep.store.results import Loc, SweepDir, load_torch
from sweep.worker.cache import worker_cache


def checkpoint_identity(sweep: SweepDir, donor_key: str) -> tuple:
    """What names a zoo checkpoint's content for the worker's cache: its location, size and modification
    time (a retrained or replaced checkpoint is another entry); where the filesystem keeps no modification
    time, a hash of its bytes."""
    path = sweep.checkpoint(donor_key)
    info = path.fs.get_file_info(path.path)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(f"zoo donor {donor_key} has no checkpoint at {path}: run the zoo stage first")
    if info.mtime_ns is None:
        return (str(path), info.size, hashlib.sha256(path.read_bytes()).hexdigest())
    return (str(path), info.size, info.mtime_ns)


def load_donor(sweep: SweepDir, donor_key: str, device: torch.device, shared: bool = False) -> StagedNet:
    """A zoo donor in eval mode: read once per worker (the worker's cache keeps it), a copy per caller (a
    trial may move its BatchNorm statistics or its memory layout). `shared=True`: the cached model itself, for
    a caller that changes nothing in it (no mode, statistics, layout or parameter gradients), which then holds
    no second copy (two WRN-28-10s: 292 MB). `model.checkpoint_identity` is what the cache knows it by
    (`checkpoint_identity`)."""
    identity = checkpoint_identity(sweep, donor_key)
    cache = worker_cache()

    def read() -> StagedNet:
        model = _read_donor(sweep.checkpoint(donor_key), device)
        library = getattr(model, "library", None)  # a library network: its version keys its activations too
        model.checkpoint_identity = (*identity, library) if library else identity
        return model

    model = cache.get(("donor", *identity, str(device)), read)
    return copy.deepcopy(model).eval() if cache.settings.enabled and not shared else model


def _read_donor(path: Loc, device: torch.device) -> StagedNet:
    ckpt = load_torch(path, map_location=device)
    model = build(
        ckpt["arch"],
        ckpt["in_channels"],
        ckpt["num_classes"],
        ckpt["mean"],
        ckpt["std"],
        image_size=ckpt.get("image_size", 32),
    )
    model.load_state_dict(ckpt["state_dict"])
    return model.to(device).eval()


def donor_row(sweep: SweepDir, donor_name: str, eval_id: str, donor_key: str, ev: DonorEval) -> dict | None:
    """The donors-table row of exactly this donor and evaluation (same images, same attack settings), or
    None when there is none (or it failed, or records other settings). `eval_id`: the evaluation's id, as the
    plan computed it (`ev.eval_id(donor_key)`; a trial carries the ids of its two rows). A worker reads each
    part once: on a local disk its size and modification time name it; on an object store its location alone
    (the zoo stage writes donors' parts before any unit reads them)."""
    part = sweep.donor_part(donor_name, eval_id)
    try:
        row = worker_cache().get(("donor_row", *_part_identity(part)), lambda: _recorded_row(part))
    except Exception:  # missing or unreadable: the caller measures what it needs itself
        return None
    wanted = {"donor_key": donor_key, "status": "done", **ev.row_fields()}
    return dict(row) if all(row.get(k) == v for k, v in wanted.items()) else None


def _recorded_row(part: Loc) -> dict:
    """The part's row, loose or in the donors table's compacted files (after the zoo stage)."""
    from sweep.store.results import recorded_row

    row = recorded_row(part)
    if row is None:
        raise FileNotFoundError(str(part))
    return row


def _part_identity(part: Loc) -> tuple:
    if not part.is_local:
        return (str(part),)
    info = part.fs.get_file_info(part.path)
    if info.type == pafs.FileType.NotFound:  # compacted: the compacted files' names (new at each compaction)
        from sweep.store.compact import is_compacted

        held = tuple(f.name for f in part.parent.files(".parquet") if is_compacted(f))
        if not held:
            raise FileNotFoundError(str(part))
        return (str(part), held)
    return (str(part), info.size, info.mtime_ns)


def predictions_loc(sweep: SweepDir, donor_key: str, dataset: str, n: int) -> Loc:
    """Where a donor's predicted classes on the first `n` test images of `dataset` are kept (in the zoo: they
    depend on the checkpoint and the images alone)."""
    return sweep.zoo(donor_key) / f"test-predictions-{dataset}-{n}.pt"
