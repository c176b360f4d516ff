"""What a sweep still has to do, and how far it is: per kind of work, which units have no usable part yet.

Shared by `run`/`resume` (what to schedule), `status` and tests. It reads only the registered kinds (`KINDS`)
and the parts' statuses: one listing per folder, then the parts in parallel (on an object store each read is a
request).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from sweep.registry import KINDS


def statuses(parts: list, known: dict | None = None, seen: dict | None = None, repair: bool = False) -> dict:
    """The status of each of `parts`: one listing per folder, then a read of each part that exists (in
    parallel: on an object store each read is a request), except those `known` (a status manifest: path ->
    [size, mtime_ns, status]) records with the size and modification time the listing shows. An unreadable
    part counts as absent, as does a missing one (None); with `repair` (what a run does, not `status` or
    `report`) it is also set aside (renamed `*.corrupt`, reported) so that it can be computed again.
    `seen`, when given, receives path -> [size, mtime_ns, status] of every part found (the next manifest).
    A part that is not loose has the status of its row in the folder's compacted files (`sweep.store.compact`)."""
    from concurrent.futures import ThreadPoolExecutor

    from sweep.store.compact import compacted_statuses
    from sweep.store.results import read_status, set_aside

    if not parts:
        return {}
    stamps: dict[str, tuple[int, int]] = {}
    compacted: dict[str, dict] = {}  # folder -> part name -> status, from its compacted files
    for key, folder in {str(p.parent): p.parent for p in parts}.items():
        listed = folder.file_stamps(".parquet")
        stamps.update(listed)
        unreadable: list = []
        compacted[key] = compacted_statuses(folder, [posixpath.basename(p) for p in listed], unreadable)
        for bad in unreadable if repair else ():  # its units count as pending: set it aside, they run again
            print(f"warning: unreadable compacted file {bad}: set aside as {set_aside(bad).name}", flush=True)
    known = known or {}
    existing = [p for p in parts if p.path in stamps]
    cached = {p: known[p.path][2] for p in existing if list(known.get(p.path, [])[:2]) == list(stamps[p.path])}
    to_read = [p for p in existing if p not in cached]
    with ThreadPoolExecutor(max_workers=16) as pool:
        found = {**cached, **dict(zip(to_read, pool.map(read_status, to_read)))}
    if seen is not None:
        seen.update({p.path: [*stamps[p.path], s] for p, s in found.items() if s is not None})
    for part, status in found.items():
        if status is None and repair:
            print(
                f"warning: unreadable results part {part}: set aside as {set_aside(part).name}; it will be recomputed",
                flush=True,
            )
        elif status is None:
            print(f"warning: unreadable results part {part}: counted as missing (`resume` recomputes it)", flush=True)
    # a part no longer loose is recorded where compaction put it (a loose copy, newer, wins above)
    return {p: found.get(p) or compacted[str(p.parent)].get(p.name) for p in parts}


@dataclass
class Progress:
    """Where one kind of work stands: unit ids that are done, failed (every part written, one says failed),
    and pending (some part missing)."""

    kind: str
    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    failed_parts: dict = field(default_factory=dict)  # unit id -> its failed parts
    blocked: dict = field(default_factory=dict)  # unit id -> the failed donors it reads (not run until they succeed)

    @property
    def total(self) -> int:
        return len(self.done) + len(self.failed) + len(self.pending) + len(self.blocked)


def failed_donors(sweep, sweep_dir) -> set[str]:
    """The refs ('zoo:name') of the donors whose zoo stage failed (recorded failed, not done)."""
    donors = KINDS["donor"].units(sweep)
    return {donors[uid].donor.ref for uid in progress(sweep, sweep_dir, ["donor"])["donor"].failed}


def blocked_by(kind, unit, failed: set[str]) -> list[str]:
    """The failed donors among those `unit` reads (none for a kind that reads no donors)."""
    return [ref for ref in dict.fromkeys(kind.donors(unit) if kind.donors else ()) if ref in failed]


STATUS_MANIFEST = "status.json"  # path -> [size, mtime_ns, status] of every part a run saw at its end


def read_manifest(sweep_dir) -> dict:
    """The status manifest `write_manifest` left (empty when there is none or it cannot be read)."""
    import json

    try:
        return json.loads((sweep_dir.path / STATUS_MANIFEST).read_text())
    except (OSError, ValueError):
        return {}


def write_manifest(sweep, sweep_dir) -> int:
    """Record every part's status with the size and modification time its listing shows, atomically: the
    next `status`, `resume` or `run` reads only the parts that changed since (on an object store, a handful
    of listing requests instead of a request per part). Returns how many parts it records."""
    import json

    seen: dict = {}
    progress(sweep, sweep_dir, seen=seen)
    (sweep_dir.path / STATUS_MANIFEST).write_text(json.dumps(seen))
    return len(seen)


def progress(
    sweep, sweep_dir, kinds=None, seen: dict | None = None, repair: bool = False, only: dict | None = None
) -> dict[str, Progress]:
    """Kind name -> Progress, for every registered kind (or those named in `kinds`), of its units that `only`
    selects (kind name -> unit ids; None: all). A pending unit that reads a failed donor is `blocked` instead:
    it cannot run until the donor does. Parts the status manifest records unchanged are not read."""
    out = {}
    known = read_manifest(sweep_dir)
    failed = failed_donors(sweep, sweep_dir) if kinds != ["donor"] else set()
    for name in kinds or list(KINDS):
        kind = KINDS[name]
        units = kind.units(sweep)
        picked = units if only is None else {u: units[u] for u in units if u in only.get(name, ())}
        parts = {uid: kind.parts(sweep_dir, unit) for uid, unit in picked.items()}
        found = statuses([p for ps in parts.values() for p in ps], known, seen, repair)
        prog = Progress(name)
        for uid, ps in parts.items():
            states = [found[p] for p in ps]
            if all(s == "done" for s in states):
                prog.done.append(uid)
            elif all(s is not None for s in states):
                prog.failed.append(uid)
                prog.failed_parts[uid] = [p for p, s in zip(ps, states) if s == "failed"]
            elif blocked_by(kind, units[uid], failed):
                prog.blocked[uid] = blocked_by(kind, units[uid], failed)
            else:
                prog.pending.append(uid)
        out[name] = prog
    return out


def to_run(sweep, sweep_dir, retry_failed: bool, dry: bool = False, only: dict | None = None) -> dict[str, list[str]]:
    """Kind name -> the unit ids a run schedules: the pending ones, and the failed ones of a kind that reruns
    them (donors) or when `retry_failed` (their failed parts are removed first, so the units run again). Units
    blocked by a failed donor are scheduled too: the donor stage runs again first, and `runnable` drops those
    whose donor failed again before their stage starts. `dry` (`plan --storage`) changes nothing: no failed
    part is removed and no unreadable one set aside. `only` (kind name -> unit ids) restricts it to those."""
    plan = {}
    for name, prog in progress(sweep, sweep_dir, repair=not dry, only=only).items():
        retry = retry_failed or KINDS[name].rerun_failed
        if retry and not dry:
            for uid in prog.failed:
                for part in prog.failed_parts[uid]:
                    part.unlink(missing_ok=True)
        plan[name] = prog.pending + list(prog.blocked) + (prog.failed if retry else [])
    return plan


def blocked_note(noun: str, blocked: dict[str, list[str]]) -> str:
    """What a run says of the units it leaves out because their donors failed."""
    donors = sorted({d for ds in blocked.values() for d in ds})
    return (
        f"{len(blocked)} {noun} blocked by failed donors ({', '.join(donors)}): not run; they run once the donor"
        " succeeds (`stitchsweep resume`)"
    )


def runnable(sweep, sweep_dir, name: str, uids: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """(the units of kind `name` among `uids` that can run now, those blocked -> their failed donors): asked
    just before the kind's stage starts, after the donor stage of the same run."""
    kind = KINDS[name]
    if kind.donors is None:
        return uids, {}
    failed, units = failed_donors(sweep, sweep_dir), kind.units(sweep)
    blocked = {uid: blocked_by(kind, units[uid], failed) for uid in uids}
    return [u for u in uids if not blocked[u]], {u: b for u, b in blocked.items() if b}


def read_error(part) -> str | None:
    """The `error` recorded in a failed part (None when it cannot be read)."""
    try:
        return part.read_parquet(columns=["error"])["error"][0].as_py()
    except Exception:
        return None


SUMMARY_LINES = 40  # `plan`'s summary lists at most this many groups of a kind


def plan_lines(sweep, units: dict[str, dict], full: bool) -> list[str]:
    """`plan`'s lines: every unit (`full`), or per kind its units counted by group (`Kind.group`), and the
    senders that are no network."""
    from sweep.registry import DONOR_SOURCES

    lines = []
    for name, kind in KINDS.items():
        if full or kind.group is None:
            lines += [kind.line(u) for u in units[name].values()]
            continue
        groups: dict[str, int] = {}
        for u in units[name].values():
            groups[kind.group(u)] = groups.get(kind.group(u), 0) + 1
        for g, n in list(groups.items())[:SUMMARY_LINES]:
            lines.append(f"{g}: {n} {kind.noun if n != 1 else kind.noun.rstrip('s')}")
        if len(groups) > SUMMARY_LINES:
            lines.append(f"... and {len(groups) - SUMMARY_LINES} more groups (`plan --trials` lists every unit)")
    for d in sweep.donors.values():
        if not d.network:  # nothing to train or evaluate: no unit of work, but part of the plan
            lines.append(f"sender {d.ref}: {DONOR_SOURCES[d.source].describe(d)} (no network)")
    return lines


def plan_json(sweep, units: dict[str, dict], todo: dict[str, list[str]] | None) -> dict:
    """`plan --json`: per kind its count and every unit's id and label; with a results root (`todo`: what a run
    would do there), how many are recorded and which would run."""
    kinds = {}
    for name, kind in KINDS.items():
        if not units[name]:
            continue
        entry = {
            "noun": kind.noun,
            "count": len(units[name]),
            "units": [{"id": uid, "label": kind.label(u)} for uid, u in units[name].items()],
        }
        if todo is not None:
            entry["to_run"] = list(todo.get(name, ()))
            entry["recorded"] = entry["count"] - len(entry["to_run"])
        kinds[name] = entry
    senders = [d.ref for d in sweep.donors.values() if not d.network]
    return {"sweep": sweep.name, "kinds": kinds, "senders": senders}


def check_data(sweep) -> None:
    """Fail fast: every dataset the sweep reads is on disk, or is downloaded now, once, where this runs (the
    driver of an embedded Ray; a task on a worker node of a cluster); a dataset that cannot be had stops the
    run before anything is scheduled, in one line (not once per trial)."""
    from pathlib import Path

    from sweep.config.errors import SpecError
    from sweep.data.declared import missing_files

    names = {sweep.data.dataset} | {d.data.dataset for d in sweep.donors.values()}
    names |= {o for t in sweep.trials for o in t.ood_outliers if o != "noise"}
    root = Path(sweep.data_root) if sweep.data_root else None
    for name in sorted(names):
        if not missing_files(name, root):
            continue
        print(f"dataset {name}: files missing, downloading once before the sweep starts", flush=True)
        try:
            from sweep.data.core import load_pool

            load_pool(name, sweep.data_root, sweep.download)
        except Exception as exc:  # noqa: BLE001  (whatever a download raises: one line, then stop)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise SpecError(
                "data", f"the {name} files, or a download of them", "neither", f"{type(exc).__name__}: {first}"
            ) from None
