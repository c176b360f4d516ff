"""A soak of the engine: `scale_ray.py`'s sleeping units through `stitchsweep run`, with faults injected at
seeded random units and moments (docs/operations.md, "Failures and resuming"), then checked to the unit.

The kind `soak` (registered here as `scale_ray.py` registers `sleep`) has units that sleep a seeded lognormal
duration and write their row as their Parquet part, skipped when their part exists, as every kind's. Its
section `soak: {count, seed, median_s, cap_s, fail_rate, kills, faults_dir}` also plans the faults
(`plan_faults`, from the seed):

- `fail_rate` of the units raise (`RuntimeError: injected failure: <id>`): each must be recorded failed once
  with that reason, and never run again by `resume` (without `--failed`);
- `kills` units (5-30% of the way) hold on their first attempt until the harness SIGKILLs their Ray worker
  (its pid from the attempt log): Ray retries each as a lost worker;
- the driver (and its embedded Ray) is SIGKILLed once a seeded fraction (35-60%) of the units finished and
  the units whose worker was killed ran again; then `resume`;
- one unit (70-90% of the way) raises `DiskFull(folder, 4096)` until the flag file `FAULTS/space-freed`
  exists: the run stops with exit 3, the harness creates the flag and `resume`s.

Every attempt appends a line to `FAULTS/attempts.log` (start, hold, raise, disk_full, wrote, skip) from the
worker; `soak_checks.py` checks the rows, the files and that log: every unit recorded exactly once (done, or
failed with its injected reason), no failure that was not injected, no part written twice, no unit run again
once it had finished, every attempt cut short by an injected fault.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/soak.py --units 5000 --slots 16 --median 0.1 [--seed 0]
        [--workdir DIR]

Prints each phase (command, wall time, exit status, units written, faults met) and the checks; exit 1 when one
fails.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.benchmarks.scale_ray import SLEEP_SCHEMA, _env, _kill_tree, durations  # noqa: E402

KIND = "soak"
FREED = "space-freed"  # the flag file: the disk has room again
LOG = "attempts.log"
HOLD_S = 120.0  # a held unit not killed by then goes on (the checks then find the kill missing)
MAX_PHASES = 6


@dataclass(frozen=True)
class Faults:
    """What the seed injects, by unit index: units that raise, units whose worker is killed, the unit whose
    disk is full, and the fraction of units finished when the driver is killed."""

    raising: frozenset = field(default_factory=frozenset)
    kills: tuple = ()
    disk_full: int | None = None
    driver_at: float | None = None

    def of(self, i: int) -> str:
        if i in self.raising:
            return "raise"
        if i in self.kills:
            return "kill"
        return "disk_full" if i == self.disk_full else ""


def plan_faults(n: int, seed: int, fail_rate: float = 0.01, kills: int = 3) -> Faults:
    """The seeded faults of N units (`fail_rate` of them raising, at least one; `kills` worker kills)."""
    rng = random.Random(seed * 7919 + 17)  # not the durations' stream
    span = lambda lo, hi: range(int(lo * n), max(int(lo * n) + 1, int(hi * n)))  # noqa: E731
    killed = tuple(sorted(rng.sample(span(0.05, 0.3), kills)))
    disk = rng.choice([i for i in span(0.7, 0.9) if i not in killed])
    others = [i for i in range(n) if i not in killed and i != disk]
    raising = frozenset(rng.sample(others, max(1, round(fail_rate * n))))
    return Faults(raising, killed, disk, rng.uniform(0.35, 0.6))


def unit_id(seed: int, i: int) -> str:
    return f"{KIND}-{seed}-{i:06d}"


def _parse(raw, ctx) -> tuple:
    from sweep.config.fields import Option, Section

    sec = Section(raw, KIND, {"count", "seed", "median_s", "cap_s", "fail_rate", "kills", "faults_dir"})
    count = sec.read(Option("count", "integer", low=1, doc="how many units"))
    seed = sec.read(Option("seed", "integer", 0, doc="the durations' and the faults' seed"))
    median = sec.read(Option("median_s", "number", 0.1, low=0.0, doc="the durations' median (0: none)"))
    cap = sec.read(Option("cap_s", "number", 5.0, low=0.0, doc="the longest duration"))
    rate = sec.read(Option("fail_rate", "number", 0.01, low=0.0, high=0.5, doc="the units that raise"))
    kills = sec.read(Option("kills", "integer", 3, low=0, doc="the units whose worker is killed"))
    folder = sec.read(Option("faults_dir", "string", doc="the attempt log and the flag files"))
    faults = plan_faults(count, seed, rate, kills)
    return tuple((unit_id(seed, i), d, faults.of(i), folder) for i, d in enumerate(durations(count, seed, median, cap)))


def _parts(sweep_dir, unit) -> list:
    return [sweep_dir.path / KIND / f"{unit[0]}.parquet"]


def log_event(folder: str, event: str, uid: str, t0: float | None = None) -> None:
    """One line of the attempt log (time, event, unit, pid, the attempt's start), in one append: lines of
    concurrent workers never interleave."""
    line = f"{time.time():.6f}\t{event}\t{uid}\t{os.getpid()}\t{'' if t0 is None else f'{t0:.6f}'}\n"
    fd = os.open(os.path.join(folder, LOG), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def run_unit(unit, ctx) -> dict:
    """Sleep the unit's duration and write its row as its one part, after its injected fault: raise, hold
    until the worker is killed (first attempt only: the harness leaves `killed-<id>` before it kills), or
    find the disk full (until `space-freed` exists). Skipped when its part exists."""
    from sweep.store.results import write_rows
    from sweep.store.storage import DiskFull

    uid, duration, fault, folder = unit
    part = _parts(ctx.sweep_dir, unit)[0]
    if part.exists():
        log_event(folder, "skip", uid)
        return {"status": "skipped", "error": None}
    t0 = time.time()
    log_event(folder, "start", uid, t0)
    if fault == "kill" and not os.path.exists(os.path.join(folder, f"killed-{uid}")):
        log_event(folder, "hold", uid, t0)
        while time.time() - t0 < HOLD_S:  # the harness kills this process
            time.sleep(0.05)
        log_event(folder, "unheld", uid, t0)
    if fault == "raise":
        log_event(folder, "raise", uid, t0)
        raise RuntimeError(f"injected failure: {uid}")
    if fault == "disk_full" and not os.path.exists(os.path.join(folder, FREED)):
        log_event(folder, "disk_full", uid, t0)
        raise DiskFull(str(ctx.sweep_dir.path / KIND), 4096)
    time.sleep(duration)
    row = dict(unit_id=uid, status="done", error=None, duration_s=duration, t_start=t0, t_end=time.time())
    write_rows(part, [dict(row, worker_pid=os.getpid())], SLEEP_SCHEMA)
    log_event(folder, "wrote", uid, t0)
    return {"status": "done", "error": None}


def register() -> None:
    """Register the kind `soak` in this process (the driver; its `run` is imported by name in the workers)."""
    from sweep.kinds.base import Kind, register_kind
    from sweep.registry import KINDS

    list(KINDS)  # the built-in kinds first
    if KIND in KINDS._entries:
        return
    register_kind(
        Kind(
            KIND,
            KIND,
            "soak units",
            KIND,
            _parts,
            "tests.benchmarks.soak:run_unit",
            lambda u: u[0],
            section=KIND,
            parse=_parse,
            unit_id=lambda u: u[0],
            schema=SLEEP_SCHEMA,
            timing=None,
        )  # fmt: skip
    )


def write_space(path: Path, n: int, slots: int, median_s: float, seed: int, faults_dir: Path, cores: int = 2):
    path.write_text(
        "name: soak\ndata: {dataset: digits}\n"
        "donors: {a: {arch: resnet_tiny, training: plain, epochs: 1, seed: 0}}\n"
        f"soak: {{count: {n}, seed: {seed}, median_s: {median_s}, faults_dir: '{faults_dir}'}}\n"
        f"resources: {{cpus_per_trial: {cores / slots}}}\n"
    )
    return path


def _cli(args: list[str]) -> list[str]:
    code = "import sys; from tests.benchmarks.soak import register; register(); from sweep.cli import main; "
    return [sys.executable, "-c", code + f"sys.exit(main({args!r}))"]


def _is_ray_worker(pid: int) -> bool:
    """Whether `pid` is a live Ray worker (Ray titles its workers `ray::<task>`)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::")
    except OSError:
        return False


class Monitor:
    """Follows the attempt log while a command runs: SIGKILLs the worker of each held unit (leaving
    `killed-<id>` first, so that its retry runs), and says when the driver's moment has come."""

    def __init__(self, folder: Path, n: int, faults: Faults, kill_driver: bool) -> None:
        self.folder, self.n, self.faults, self.kill_driver = folder, n, faults, kill_driver
        self.offset, self.partial, self.held, self.finished = 0, b"", {}, set()
        self.kills: list[dict] = []

    def poll(self, kill: bool = True) -> None:
        """Read the log's new lines; SIGKILL each held unit's worker (`kill`: while its command runs; after, a
        hold the command's end cut short is dropped: its unit, with no `killed-<id>`, holds again)."""
        path = self.folder / LOG
        if not path.exists():
            return
        with open(path, "rb") as f:
            f.seek(self.offset)
            data = self.partial + f.read()
            self.offset = f.tell()
        *lines, self.partial = data.split(b"\n")
        for line in lines:
            _, event, uid, pid, _ = line.decode().split("\t")
            if event in ("wrote", "raise"):
                self.finished.add(uid)
            elif event == "hold":
                self.held[uid] = int(pid)
        for uid, pid in list(self.held.items()):
            del self.held[uid]
            if kill and _is_ray_worker(pid):  # not a pid reused since
                (self.folder / f"killed-{uid}").touch()  # first: its retry must run
                os.kill(pid, signal.SIGKILL)
                self.kills.append({"unit": uid, "pid": pid, "t": time.time()})

    def driver_due(self) -> bool:
        """The driver's moment: the fraction finished, and each unit whose worker was killed run again and
        written (so that the driver said its retry)."""
        retried = all(k["unit"] in self.finished for k in self.kills)
        return self.kill_driver and retried and len(self.finished) >= self.faults.driver_at * self.n


def run_phase(args: list[str], log: Path, monitor: Monitor) -> dict:
    """Run one command to its end (or SIGKILL it and its Ray when the monitor says); its figures."""
    t0 = time.time()
    with open(log, "w") as out:
        proc = subprocess.Popen(_cli(args), stdout=out, stderr=subprocess.STDOUT, env=_env(), cwd=REPO)
        killed, before = False, len(monitor.kills)
        while proc.poll() is None:
            monitor.poll()
            if not killed and monitor.driver_due():
                killed, monitor.kill_driver = True, False
                finished = len(monitor.finished)
                _kill_tree(proc.pid)
                proc.wait()
                break
            time.sleep(0.1)
    monitor.poll(kill=False)
    out = {"cmd": args[0], "t0": t0, "t1": time.time(), "rc": proc.returncode, "killed": killed}
    out.update(worker_kills=monitor.kills[before:], log=log)
    if killed:
        out["finished_at_kill"] = finished
    return out


def soak(workdir: Path, n: int, slots: int, median_s: float, seed: int = 0, kills: int = 3) -> dict:
    """The whole soak: `run`, then `resume` after each stop (the driver killed; exit 3, once the harness freed
    space), until a command ends with 0 or one fails otherwise. Returns the phases, the faults, the rows."""
    from tests.benchmarks.soak_checks import read_rows, recorded_ids

    faults_dir = workdir / "faults"
    faults_dir.mkdir(parents=True, exist_ok=True)
    space = write_space(workdir / "soak.yaml", n, slots, median_s, seed, faults_dir)
    storage, results = workdir / "results", workdir / "results" / "soak"
    args = ["run", str(space), "--storage", str(storage), "--num-cpus", "2"]
    monitor = Monitor(faults_dir, n, plan_faults(n, seed, kills=kills), kill_driver=True)
    phases: list[dict] = []
    while len(phases) < MAX_PHASES:
        phase = run_phase(args, workdir / f"phase{len(phases) + 1}-{args[0]}.log", monitor)
        phases.append(phase)
        if phase["rc"] == 3:
            (faults_dir / FREED).touch()  # space freed
        elif not phase["killed"]:
            break  # done (0; 1 with units recorded failed), or a failure the checks report
        phase["recorded"] = recorded_ids(results)  # what the next command must not run again
        args = ["resume", str(results), "--num-cpus", "2"]
    return {"phases": phases, "faults": monitor.faults, "n": n, "seed": seed, "results": results,
            "faults_dir": faults_dir, "rows": read_rows(results)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    from tests.benchmarks.soak_checks import check, summary

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", type=int, default=5000)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--median", type=float, default=0.1, help="the durations' median in seconds")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=None, help="where the space and results go (default: a temporary folder)")
    a = ap.parse_args(argv)
    workdir = Path(a.workdir or tempfile.mkdtemp(prefix="soak_"))
    workdir.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    out = soak(workdir, a.units, a.slots, a.median, a.seed)
    problems = check(out)
    print(f"load average at the start: {load:.1f} (1 min), at the end: {os.getloadavg()[0]:.1f}; {os.cpu_count()}"
          f" cores; N={a.units} S={a.slots} median={a.median} seed={a.seed}; workdir {workdir}")  # fmt: skip
    for line in summary(out):
        print(line)
    print("checks:", "all hold" if not problems else "")
    for p in problems:
        print("  FAILED:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
