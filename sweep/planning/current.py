"""The results of a sweep are the units of its current plan (the expanded space `run` keeps): the parts of
every other unit (of an earlier version of an edited plugin, of a space that shrank) are stale. At the start of
every `run`/`resume`, stale parts leave the tables for `RESULTS/_stale/<table>/` (kept, counted apart by `status`
and `du`, read on request by `analysis.load(..., stale=True)`, removed by `prune --stale`), stale parts whose
units the space names again come back without being computed again, and `RESULTS/current.json` records each
table's current part names, which the readers also filter by."""

from __future__ import annotations

import json

from sweep.registry import KINDS, resolve
from sweep.store.layout import CURRENT_FILE, KEPT_SUFFIX, STALE_DIR, STORE_TABLE_KEYS


def current_parts(sweep, sweep_dir) -> dict[str, set[str]]:
    """Table -> the names of the parts the units of `sweep` write (what its tables hold once it is complete): each
    unit's parts, and those of the store's own tables it may write (`Kind.side_parts`: curves, energies)."""
    out: dict[str, set[str]] = {table: set() for table in STORE_TABLE_KEYS}
    for kind in KINDS.values():
        side = resolve(kind.side_parts) if kind.side_parts else lambda sweep_dir, unit: []
        for unit in kind.units(sweep).values():
            for part in [*kind.parts(sweep_dir, unit), *side(sweep_dir, unit)]:
                out.setdefault(part.parent.name, set()).add(part.name)
    return out


def retire_stale(sweep, sweep_dir) -> tuple[dict[str, int], dict[str, int]]:
    """Move the parts of units the space no longer names out of the tables, and those it names again back;
    record the current part names. Returns ({table: parts set aside}, {table: parts brought back}). Only between
    runs' stages (the lease held): no unit writes meanwhile."""
    from sweep.store.aside import restore, retire

    current, gone, back = current_parts(sweep, sweep_dir), {}, {}
    for table, names in current.items():
        folder, aside = sweep_dir.path / table, sweep_dir.path / STALE_DIR / table
        if n := retire(folder, names, aside):
            gone[table] = n
        if returned := restore(folder, names, aside):
            back[table] = len(returned)
    (sweep_dir.path / CURRENT_FILE).write_text(json.dumps({t: sorted(n) for t, n in current.items()}))
    return gone, back


def stale_counts(sweep_dir) -> dict[str, int]:
    """Table -> how many stale parts `RESULTS/_stale/` keeps of it."""
    counts: dict[str, int] = {}
    for f in (sweep_dir.path / STALE_DIR).rglob(f"*{KEPT_SUFFIX}"):
        counts[f.parent.name] = counts.get(f.parent.name, 0) + 1
    return counts


def retire_lines(gone: dict[str, int], back: dict[str, int]) -> list[str]:
    """What a run says of the parts it moved: set aside as stale, or current again."""
    lines = []
    if gone:
        what = ", ".join(f"{n} {t}" for t, n in sorted(gone.items()))
        lines.append(
            f"no longer in the space: {what} part(s), set aside in {STALE_DIR}/ (kept, not read; "
            "`analysis.load(..., stale=True)` reads them, `stitchsweep prune --stale` removes them)"
        )
    if back:
        what = ", ".join(f"{n} {t}" for t, n in sorted(back.items()))
        lines.append(f"in the space again: {what} part(s) brought back from {STALE_DIR}/, not computed again")
    return lines
