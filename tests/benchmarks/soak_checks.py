"""The checks and the summary of a soak (`soak.py`): from the units' rows, the table's files and the attempt log.

Each attempt of a unit is the log's `start` line and what its process logged of it next: `wrote` (its part
written), `raise` (its injected failure: the worker records it failed), `disk_full`, `hold` (its worker killed by
the harness), or nothing (its process died: the driver killed, or the run stopped on the full disk).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

RETRY = "lost with its worker or node; retrying"
ENDINGS = ("wrote", "raise", "disk_full", "hold", "unheld")
OPEN = (None, "hold", "unheld")  # an attempt that may still end otherwise (a held one let go, then written)


def read_rows(results: Path):
    from analysis.reading import read_table
    from tests.benchmarks.soak import KIND, register

    register()
    return read_table(str(results), KIND).to_pandas()


def recorded_ids(results: Path) -> set:
    return set(read_rows(results)["unit_id"]) if results.is_dir() else set()


def read_attempts(folder: Path) -> list[tuple]:
    """The attempt log: (time, event, unit, pid, the attempt's start or None) in the order written."""
    path, out = folder / "attempts.log", []
    for line in path.read_text().splitlines() if path.exists() else []:
        t, event, uid, pid, t0 = line.split("\t")
        out.append((float(t), event, uid, int(pid), float(t0) if t0 else None))
    return out


def attempts(events: list[tuple]) -> dict[str, list[dict]]:
    """unit -> its attempts in order, each {t0, pid, end (the event that ended it, or None), t_end}."""
    runs: dict[str, list[dict]] = defaultdict(list)
    for t, event, uid, pid, t0 in events:
        if event == "start":
            runs[uid].append({"t0": t0, "pid": pid, "end": None, "t_end": None})
        elif event in ENDINGS and runs[uid] and runs[uid][-1]["t0"] == t0 and runs[uid][-1]["end"] in OPEN:
            runs[uid][-1].update(end=event, t_end=t)
    return runs


def raw_rows(results: Path) -> tuple[int, Counter]:
    """The files of the table (loose parts and compacted ones, read as they are) and how often each id is
    in them: a part written twice into one table shows as a count of 2."""
    import pyarrow.parquet as pq

    files = sorted((results / "soak").glob("*.parquet"))
    seen: Counter = Counter()
    for f in files:
        seen.update(pq.read_table(f, columns=["unit_id"]).column("unit_id").to_pylist())
    return len(files), seen


def phase_of(phases: list[dict], t: float) -> int:
    return next((i for i, p in enumerate(phases) if p["t0"] <= t <= p["t1"]), -1)


def check_phases(out: dict) -> list[str]:
    """One driver SIGKILL, one exit 3 that says `disk full`, the last command ending with none pending (exit 1
    when units failed: `EXIT_INCOMPLETE`); each worker kill seen by the driver as a lost worker it retries."""
    phases, problems = out["phases"], []
    rcs = [("killed" if p["killed"] else p["rc"]) for p in phases]
    last = 1 if out["faults"].raising else 0  # EXIT_INCOMPLETE: failed units recorded, none pending
    if rcs.count("killed") != 1 or rcs.count(3) != 1 or rcs[-1] != last:
        problems.append(f"the commands ended {rcs}: expected one driver kill, one exit 3 and a last {last}")
    if not re.search(r"^sweep \S+: .*, 0 pending$", Path(phases[-1]["log"]).read_text(), re.M):
        problems.append(f"{phases[-1]['log'].name}: the last command did not end with 0 pending")
    for p in phases:
        text = Path(p["log"]).read_text()
        if p["rc"] == 3 and "disk full: " not in text:
            problems.append(f"{p['log'].name}: exit 3 without the disk-full line")
        retries = text.count(RETRY)
        if retries < len(p["worker_kills"]):
            problems.append(f"{p['log'].name}: {len(p['worker_kills'])} workers killed, {retries} retries said")
    kills = [k["unit"] for p in phases for k in p["worker_kills"]]
    planned = [out["ids"][i] for i in out["faults"].kills]
    if sorted(kills) != sorted(planned):
        problems.append(f"workers killed while running {sorted(kills)}, planned {sorted(planned)}")
    return problems


def check_rows(out: dict) -> list[str]:
    """Every planned unit recorded once; failed exactly the injected ones, each with its own reason."""
    rows, ids, problems = out["rows"], out["ids"], []
    if len(rows) != len(ids) or set(rows["unit_id"]) != set(ids):
        missing = sorted(set(ids) - set(rows["unit_id"]))
        problems.append(f"{len(rows)} rows, {rows['unit_id'].nunique()} ids, {len(ids)} planned; missing {missing[:3]}")
    failed = rows[rows["status"] != "done"]
    injected = {ids[i] for i in out["faults"].raising}
    if set(failed["unit_id"]) != injected:
        extra, lost = sorted(set(failed["unit_id"]) - injected), sorted(injected - set(failed["unit_id"]))
        problems.append(f"failed but not injected: {extra[:5]}; injected but not failed: {lost[:5]}")
    wrong = [u for u, s, e in zip(failed["unit_id"], failed["status"], failed["error"])
             if s != "failed" or f"injected failure: {u}" not in str(e)]  # fmt: skip
    if wrong:
        problems.append(f"{len(wrong)} failed rows without their injected reason, e.g. {wrong[:3]}")
    files, seen = raw_rows(out["results"])
    twice = sorted(u for u, c in seen.items() if c > 1)
    if twice or sum(seen.values()) != len(ids):
        problems.append(f"{sum(seen.values())} rows in the table's {files} files; ids more than once: {twice[:5]}")
    return problems


def unit_problems(uid: str, tries: list[dict], t_start: float | None, phases: list[dict]) -> list[str]:
    """What one unit's attempts break (names of `check_attempts`' problems)."""
    found = []
    wrote = [a for a in tries if a["end"] == "wrote"]
    if len(wrote) > 1:
        found.append("parts written twice")
    if len(wrote) == 1 and (t_start is None or abs(wrote[0]["t0"] - t_start) > 1e-5):
        found.append("rows not written by their logged attempt")
    ended = [a["t_end"] for a in tries if a["end"] in ("wrote", "raise")]
    if ended and any(a["t0"] > min(ended) for a in tries):
        found.append("units run again after they finished")
    if any(uid in p.get("recorded", ()) and any(a["t0"] > p["t1"] for a in tries) for p in phases):
        found.append("units run again after a stop that found them recorded")
    stopped = {i for i, p in enumerate(phases) if p["killed"] or p["rc"] == 3}
    if any(a["end"] in (None, "unheld") and phase_of(phases, a["t0"]) not in stopped for a in tries):
        found.append("attempts cut short by no injected fault")
    return found


def check_attempts(out: dict) -> list[str]:
    """No part written twice, none written by another attempt than the row's, no unit run again once it had
    finished (written, or raised and recorded), nor once it was recorded at a stop; every attempt cut short by
    an injected fault (a held one killed, the driver killed, the run stopped on the full disk)."""
    rows, phases = out["rows"], out["phases"]
    runs = attempts(read_attempts(out["faults_dir"]))
    t_start = dict(zip(rows["unit_id"], rows["t_start"]))
    found: dict[str, list[str]] = defaultdict(list)
    for uid, tries in runs.items():
        for name in unit_problems(uid, tries, t_start.get(uid), phases):
            found[name].append(uid)
    problems = [f"{name}: {len(us)}, e.g. {sorted(us)[:3]}" for name, us in found.items()]
    full = runs.get(out["ids"][out["faults"].disk_full], [])
    if not any(a["end"] == "disk_full" for a in full) or full[-1]["end"] != "wrote":
        problems.append(f"the disk-full unit's attempts: {[a['end'] for a in full]}")
    return problems


def check(out: dict) -> list[str]:
    """Everything that breaks the soak's promises (empty: nothing)."""
    from tests.benchmarks.soak import unit_id

    out.setdefault("ids", [unit_id(out["seed"], i) for i in range(out["n"])])
    return check_phases(out) + check_rows(out) + check_attempts(out)


def phase_lines(i: int, p: dict, events: list[tuple]) -> list[str]:
    """One command's figures from its attempts (`events`, those logged while it ran) and its log."""
    mine, text = Counter(e[1] for e in events), Path(p["log"]).read_text()
    starts = [e[0] for e in events if e[1] == "start"]
    ends = [e[0] for e in events if e[1] in ("wrote", "raise")]
    end = "driver SIGKILLed" if p["killed"] else f"rc {p['rc']}"
    first = f"first unit after {starts[0] - p['t0']:.1f} s" if starts else "no unit started"
    speed = f" ({len(ends) / (ends[-1] - starts[0]):.1f} units/s)" if len(ends) > 1 else ""
    lines = [
        f"phase {i + 1} {p['cmd']}: wall {p['t1'] - p['t0']:.1f} s, {end}; {first}; attempts {mine['start']}, "
        f"parts written {mine['wrote']}, raised {mine['raise']}{speed}, disk full {mine['disk_full']}, skipped "
        f"{mine['skip']}; workers killed {len(p['worker_kills'])}; retries said {text.count(RETRY)}"
    ]
    if p["killed"]:
        lines[-1] += f"; {p['finished_at_kill']} units finished when the driver was killed"
    full = next((e[0] for e in events if e[1] == "disk_full"), None)
    if full is not None:
        later = Counter(e[1] for e in events if e[0] > full)
        lines.append(f"  after the full disk: {later['start']} units started, {later['wrote']} written, the command"
                     f" ended {p['t1'] - full:.1f} s later")  # fmt: skip
    said = re.search(r"stitchsweep: error: disk full: [^\n]*", text)
    lines += [f"  said: {said.group(0)[:160]}..."] if p["rc"] == 3 and said else []
    return lines


def summary(out: dict) -> list[str]:
    """The faults planned, each phase's figures, what was recorded and what the attempts met."""
    from tests.benchmarks.soak import unit_id

    f, n, phases, rows = out["faults"], out["n"], out["phases"], out["rows"]
    events = read_attempts(out["faults_dir"])
    lines = [
        f"faults planned: {len(f.raising)} units raising, workers of {len(f.kills)} units killed (units "
        f"{', '.join(str(i) for i in f.kills)}), the driver killed at {f.driver_at:.0%} of the units finished, "
        f"the disk full for unit {f.disk_full}"
    ]
    for i, p in enumerate(phases):
        lines += phase_lines(i, p, [e for e in events if phase_of(phases, e[0]) == i])
    done, failed = int((rows["status"] == "done").sum()), int((rows["status"] == "failed").sum())
    total = phases[-1]["t1"] - phases[0]["t0"]
    files, seen = raw_rows(out["results"])
    lines.append(f"recorded: {done} done, {failed} failed, of {n} units ({len(rows)} rows; the table's files hold "
                 f"{sum(seen.values())} rows in {files} files); total wall {total:.1f} s")  # fmt: skip
    ids = [unit_id(out["seed"], i) for i in range(n)]
    runs = attempts(events)
    repeated = Counter(len(runs.get(u, [])) for u in ids)
    lines.append(f"attempts per unit: {dict(sorted(repeated.items()))}")
    return lines
