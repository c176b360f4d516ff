"""What a sweep writes to its storage, known before it runs: `plan`'s disk lines, and the check that a local
results folder has room for it (an object store cannot tell, and is not checked).

Counted: what each kind of work says its units write beside their parts (`Kind.disk`: the inversion units'
images, images x channels x height x width in the unit's `dtype`, the bulk of what a sweep writes). Not
counted: the Parquet parts (a few kB a unit), the donors' checkpoints and kept epochs (they depend on the
network's size, which planning does not build), and the stitchers trials keep.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

from sweep.config.errors import SpecError


def need(sweep, todo: dict | None = None) -> dict[tuple[str, str], list[int]]:
    """(the kind's noun, its line) -> the bytes of each unit that would run (all of them without `todo`) of
    every kind that counts what its units write (`Kind.disk`)."""
    from sweep.registry import KINDS, resolve

    out: dict[tuple[str, str], list[int]] = defaultdict(list)
    for kind in KINDS.values():
        if kind.disk is None:
            continue
        units = kind.units(sweep)
        wanted = set(todo.get(kind.name, ())) if todo is not None else set(units)
        for uid, unit in units.items():
            if uid in wanted:
                what, size = resolve(kind.disk)(unit)
                out[(kind.noun, what)].append(size)
    return out


def plan_lines(sweep, todo: dict | None = None) -> list[str]:
    """`plan`'s lines on disk: per kind of inverted images, the units, the most one writes, and the total."""
    groups = need(sweep, todo)
    if not groups:
        return []
    lines = []
    for (noun, what), sizes in sorted(groups.items()):
        lines.append(
            f"disk: {len(sizes)} {noun} ({what}) write up to {_size(max(sizes))} each, {_size(sum(sizes))} in all"
        )
    total = sum(sum(s) for s in groups.values())
    lines.append(f"disk: {_size(total)} written in all (checkpoints and Parquet parts not counted)")
    return lines


def check_room(sweep, todo: dict | None, sweep_dir) -> None:
    """Refuse, naming --storage, a run whose units' files (`Kind.disk`) will not fit in a local results folder's
    free space (an object store cannot tell: not checked)."""
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
            f"room for the {_size(total)} this sweep would write (inverted images: or inversions' dtype: uint8)",
            f"{_size(free)} free at {where}",
        )


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"
