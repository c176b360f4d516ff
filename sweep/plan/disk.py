"""What a sweep writes to its storage, known before it runs: `plan`'s disk lines, and the check that a local
results folder has room for it (an object store cannot tell, and is not checked).

Counted: the inverted images of the inversion units (images x channels x height x width, in the unit's
`dtype`), the bulk of what a sweep writes. Not counted: the Parquet parts (a few kB a unit), the donors'
checkpoints and kept epochs (they depend on the network's size, which planning does not build), and the
stitchers trials keep.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

from sweep.config.errors import SpecError
from sweep.store.inverted import PREVIEW

ITEMSIZE = {"float32": 4, "float16": 2, "uint8": 1}
PER_IMAGE = 8 * 4  # an image's losses and best step in its shard, its indices in the index


def inversion_bytes(unit) -> int:
    """Bytes an inversion unit writes: its images in its dtype, plus the index and its 8-bit previews."""
    from sweep.registry import DATASETS

    info = DATASETS[unit.dataset]
    pixels = info.channels * info.image_size * info.image_size
    return unit.images * (pixels * ITEMSIZE[unit.dtype] + PER_IMAGE) + 3 * PREVIEW * pixels


def need(sweep, todo: dict | None = None) -> dict[tuple[str, int], list[int]]:
    """(dtype, image size) -> the bytes of each inversion unit that would run (all of them without `todo`)."""
    units = sweep.units.get("inversion", ())
    if todo is not None:
        units = [u for u in units if u.unit_id in set(todo.get("inversion", ()))]
    from sweep.registry import DATASETS

    out: dict[tuple[str, int], list[int]] = defaultdict(list)
    for u in units:
        out[(u.dtype, DATASETS[u.dataset].image_size)].append(inversion_bytes(u))
    return out


def plan_lines(sweep, todo: dict | None = None) -> list[str]:
    """`plan`'s lines on disk: per kind of inverted images, the units, the most one writes, and the total."""
    groups = need(sweep, todo)
    if not groups:
        return []
    lines = []
    for (dtype, size), sizes in sorted(groups.items()):
        lines.append(
            f"disk: {len(sizes)} inversion units ({size} px, {dtype}) write up to {_size(max(sizes))} each, "
            f"{_size(sum(sizes))} in all"
        )
    total = sum(sum(s) for s in groups.values())
    lines.append(f"disk: {_size(total)} of inverted images in all (checkpoints and Parquet parts not counted)")
    return lines


def check_room(sweep, todo: dict | None, sweep_dir) -> None:
    """Refuse, naming --storage, a run whose inverted images will not fit in a local results folder's free
    space (an object store cannot tell: not checked)."""
    if not sweep_dir.path.is_local:
        return
    total = sum(sum(s) for s in need(sweep, todo).values())
    if not total:
        return
    where = Path(sweep_dir.path.path)
    while not where.exists() and where != where.parent:  # the folder may not exist yet: its first ancestor
        where = where.parent
    free = shutil.disk_usage(where).free
    if total > free:
        raise SpecError(
            "--storage",
            f"room for the {_size(total)} of inverted images this sweep would write (or inversions' dtype: uint8)",
            f"{_size(free)} free at {where}",
        )


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"
