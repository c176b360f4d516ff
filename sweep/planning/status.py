"""What `stitchsweep status` says: per kind of work its done / failed / pending counts and its first failures,
as lines or as JSON (which `report` reads for its header)."""

from __future__ import annotations

from sweep.planning.current import stale_counts
from sweep.planning.planning import progress, read_error
from sweep.store.layout import STALE_DIR


def print_status(sweep, sweep_dir, only: dict | None = None) -> bool:
    """Print done / failed / pending counts of every kind of work (of the units `only` selects: kind name ->
    unit ids; None: all), and the first failures' errors; True when every unit is done."""
    from sweep.registry import KINDS

    complete, any_failed = True, False
    for name, prog in progress(sweep, sweep_dir, only=only).items():
        kind = KINDS[name]
        if not prog.total:
            continue
        blocked = ""
        if prog.blocked:
            donors = sorted({d for ds in prog.blocked.values() for d in ds})
            blocked = f", {len(prog.blocked)} blocked by failed donors ({', '.join(donors)})"
        print(
            f"sweep {sweep.name}: {prog.total} {kind.noun}: {len(prog.done)} done, {len(prog.failed)} failed,"
            f" {len(prog.pending)} pending{blocked}"
        )
        units = kind.units(sweep)
        for uid in prog.failed[:20]:
            error = next(filter(None, map(read_error, prog.failed_parts[uid])), None)
            print(f"  failed {uid} {kind.label(units[uid])}: {error}")
        if len(prog.failed) > 20:
            print(f"  ... and {len(prog.failed) - 20} more failed (see the {kind.table} table)")
        complete = complete and not prog.failed and not prog.pending and not prog.blocked
        any_failed = any_failed or bool(prog.failed)
    stale = stale_counts(sweep_dir)
    if stale:
        parts = ", ".join(f"{n} {table}" for table, n in sorted(stale.items()))
        print(f"stale, no longer in the space (kept in {STALE_DIR}/, not read): {parts} part(s)")
    if not complete:
        print(f"finish with: stitchsweep resume {sweep_dir.uri}" + (" --failed" if any_failed else ""))
    return complete


def status_json(sweep, sweep_dir, only: dict | None = None) -> dict:
    """What `status --json` prints: per kind of work its counts (of the units `only` selects) and its first
    failures."""
    from sweep.registry import KINDS

    kinds = {}
    for name, prog in progress(sweep, sweep_dir, only=only).items():
        if not prog.total:
            continue
        kind, units = KINDS[name], KINDS[name].units(sweep)
        failures = [
            {
                "id": uid,
                "label": kind.label(units[uid]),
                "error": next(filter(None, map(read_error, parts)), None),
            }
            for uid, parts in list(prog.failed_parts.items())[:20]
        ]
        counts = {"total": prog.total, "done": len(prog.done), "failed": len(prog.failed), "pending": len(prog.pending)}
        kinds[name] = {"noun": kind.noun, **counts, "blocked": prog.blocked, "failures": failures}
    complete = all(k["failed"] == 0 and k["pending"] == 0 and not k["blocked"] for k in kinds.values())
    stale = stale_counts(sweep_dir)  # table -> parts of units the space no longer names
    return {"sweep": sweep.name, "results": sweep_dir.uri, "complete": complete, "kinds": kinds, "stale": stale}
