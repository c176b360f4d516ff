"""What a worker gives back between units: the memory its finished stage kept that no unit of the next one
reads (`enter_stage`), and its freed temporaries (`trim_heap`), so a reused worker does not carry each stage's
peak into the next (docs/performance.md, "Workers through `stitchsweep run`")."""

from __future__ import annotations

from sweep.worker.cache import WorkerCache


def trim_heap(collect: bool = False) -> None:
    """Return the C heap's free memory to the system (glibc's `malloc_trim`, well under a millisecond; nothing
    elsewhere). Freed tensors larger than glibc's mmap threshold go back by themselves, but the threshold rises as
    such blocks are freed, so after a unit's large temporaries a worker's resident memory stays at the unit's peak
    without it. `collect`: first a full garbage collection (about 0.1 s with PyTorch and Ray imported: once per
    stage, not per unit), for what only a reference cycle still held."""
    import ctypes
    import gc

    if collect:
        gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (macOS, musl): the allocator keeps what it keeps
        pass


STAGE: list[str] = []  # the kind of the last unit this worker process ran


def enter_stage(name: str, kind, cache: WorkerCache) -> WorkerCache:
    """A reused worker starting units of another kind lets go of what the finished stage's units kept and no
    unit of this one reads: every memory entry but the donors (shared by the stages) and, for a kind the donor
    stage computes frozen halves for (`Kind.fills`), the activations it fed; each unit's end hands its freed
    temporaries back (`trim_heap`, in `_trainable`). Returns `cache`."""
    if STAGE and STAGE[-1] != name:
        fed = kind.fills is not None
        cache.let_go(lambda key: key[0] == "donor" or (fed and key[0] in ("activations", "bytes-per-image")))
        trim_heap(collect=True)
    STAGE[:] = [name]
    return cache
