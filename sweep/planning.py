"""What a sweep still has to do: which donors, trials and representation-test units have no usable part yet.

Shared by `run`/`resume` (what to schedule) and by tests; reads the parts' status only (one listing per folder,
then the parts in parallel: on an object store each read is a request).
"""

from __future__ import annotations


def statuses(parts: list) -> dict:
    """The status of each of `parts` (all in one folder): one listing of the folder, then a read of each part
    that exists (in parallel: on an object store each read is a request). An unreadable part is set aside
    (renamed `*.corrupt`, reported) and counts as absent, as does a missing one (None)."""
    from concurrent.futures import ThreadPoolExecutor

    from sweep.results import read_status, set_aside

    if not parts:
        return {}
    present = {p.name for p in parts[0].parent.files(".parquet")}
    existing = [p for p in parts if p.name in present]
    with ThreadPoolExecutor(max_workers=16) as pool:
        found = dict(zip(existing, pool.map(read_status, existing)))
    for part, status in found.items():
        if status is None:
            print(
                f"warning: unreadable results part {part}: set aside as {set_aside(part).name}; it will be recomputed",
                flush=True,
            )
    return {p: found.get(p) for p in parts}


def pending_units(sweep, sweep_dir, retry_failed: bool) -> list[str]:
    """Representation-test units without a (usable) part."""
    parts = {u.unit_id: sweep_dir.reptest_part(u.unit_id) for u in sweep.reptests}
    found = statuses(list(parts.values()))
    todo = []
    for unit_id, part in parts.items():
        status = found[part]
        if status == "failed" and retry_failed:
            part.unlink()
            status = None
        if status is None:
            todo.append(unit_id)
    return todo


def pending(sweep, sweep_dir, retry_failed: bool) -> tuple[list[str], list[str], int]:
    """Donors to (re)run, trial ids to run, and how many trials are already done."""
    from sweep.kinds.donor import donor_part

    donor_parts = {
        name: [donor_part(sweep_dir, d, ev) for ev in sweep.donor_evals[name]] for name, d in sweep.donors.items()
    }
    found = statuses([p for parts in donor_parts.values() for p in parts])
    donors = [name for name, parts in donor_parts.items() if any(found[p] != "done" for p in parts)]
    parts = {s.trial_id: sweep_dir.trial_part(s.trial_id) for s in sweep.trials}
    found = statuses(list(parts.values()))
    todo, done = [], 0
    for trial_id, part in parts.items():
        status = found[part]
        if status is not None:
            if status == "failed" and retry_failed:
                part.unlink()
                todo.append(trial_id)
            else:
                done += 1
        else:
            todo.append(trial_id)
    return donors, todo, done
