"""The engine at the papers' sizes, by simulation: N units of a kind that only sleeps, through `stitchsweep run`
(the lean node, Ray Tune, the Parquet parts) with S slots (fractional CPUs: slots outnumber cores while units
sleep). `scale.py` measures the bookkeeping without Ray; this measures the scheduling.

The kind `sleep` is registered by this module (the registries, as a user's plugin would: tests/test_extending.py).
Its section `sleep: {count: N, seed: K, median_s: M, cap_s: C}` makes N units, unit i sleeping a seeded
lognormal duration (median M, sigma 0.5, capped at C; M = 0: the zero-duration mode, the engine's ceiling) and
writing its one row (start and end times, worker pid) as its Parquet part, as every kind does.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/scale_ray.py --units 2000 --slots 16 [--median 0.5]
        [--kill-at 0.5] [--workdir DIR] [--nodes 2 --kill-node-at 0.3]

Prints: the command's wall time and its fixed start-up (to the first unit's start) apart from the marginal
rate; wall time against the ideal (sum of durations / S, or the longest unit if larger); units a second; busy
slots per 10-second window (a barrier between Tune experiments shows as a dip); the driver's peak RSS; files
written; the times of `status`, `report` and the kind's table loader on the result. With --kill-at F the
driver (and its embedded Ray) is SIGKILLed once a fraction F of the parts exist, then `resume` finishes the
sweep: every unit recorded exactly once, none that had finished run again. With --nodes K the sweep runs on a
loopback cluster of K Ray nodes on this machine instead, and --kill-node-at F SIGKILLs a worker node whole
(`scale_ray_nodes.py`).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

SIGMA = 0.5  # the lognormal's shape: most units near the median, a tail to the cap
SLEEP_SCHEMA = pa.schema(
    [
        ("unit_id", pa.string()),
        ("status", pa.string()),
        ("error", pa.string()),
        pa.field("duration_s", pa.float64(), metadata={"description": "the seeded sleep"}),
        pa.field("t_start", pa.float64(), metadata={"description": "unix time the unit began"}),
        pa.field("t_end", pa.float64(), metadata={"description": "unix time the unit ended, before its write"}),
        pa.field("worker_pid", pa.int64(), metadata={"description": "the worker process that ran it"}),
    ]
)


def durations(count: int, seed: int, median_s: float, cap_s: float) -> list[float]:
    """Unit i's sleep: lognormal with median `median_s` (0: none), capped at `cap_s`, seeded."""
    rng = random.Random(seed)
    if median_s <= 0:
        return [0.0] * count
    return [min(cap_s, rng.lognormvariate(math.log(median_s), SIGMA)) for _ in range(count)]


def _parse(raw, ctx) -> tuple:
    from sweep.config.fields import Option, Section

    sec = Section(raw, "sleep", {"count", "seed", "median_s", "cap_s"})
    count = sec.read(Option("count", "integer", low=1, doc="how many units"))
    seed = sec.read(Option("seed", "integer", 0, doc="the durations' seed"))
    median = sec.read(Option("median_s", "number", 0.5, low=0.0, doc="the durations' median (0: none)"))
    cap = sec.read(Option("cap_s", "number", 5.0, low=0.0, doc="the longest duration"))
    return tuple((f"sleep-{seed}-{i:06d}", d) for i, d in enumerate(durations(count, seed, median, cap)))


def _parts(sweep_dir, unit) -> list:
    return [sweep_dir.path / "sleep" / f"{unit[0]}.parquet"]


def run_unit(unit, ctx) -> dict:
    """Sleep the unit's duration, then write its row as its one part (last, atomically: `write_rows`); skipped
    when its part exists, as every kind's unit (a trial Ray retries may have written it already)."""
    from sweep.store.results import write_rows

    if _parts(ctx.sweep_dir, unit)[0].exists():
        return {"status": "skipped", "error": None}
    t0 = time.time()
    time.sleep(unit[1])
    row = dict(unit_id=unit[0], status="done", error=None, duration_s=unit[1], t_start=t0, t_end=time.time())
    write_rows(_parts(ctx.sweep_dir, unit)[0], [dict(row, worker_pid=os.getpid())], SLEEP_SCHEMA)
    return {"status": "done", "error": None}


def register() -> None:
    """Register the kind `sleep` in this process (the driver; its `run` is imported by name in the workers)."""
    from sweep.kinds.base import Kind, register_kind
    from sweep.registry import KINDS

    list(KINDS)  # the built-in kinds first
    if "sleep" in KINDS._entries:
        return
    register_kind(
        Kind(
            "sleep",
            "sleep",
            "sleep units",
            "sleep",
            _parts,
            "tests.benchmarks.scale_ray:run_unit",
            lambda u: u[0],
            section="sleep",
            parse=_parse,
            unit_id=lambda u: u[0],
            schema=SLEEP_SCHEMA,
            timing=None,
        )  # fmt: skip
    )


def write_space(path: Path, n: int, slots: int, median_s: float, seed: int = 0, cores: int = 2) -> Path:
    """The benchmark's space: only `sleep` units (no donor is used, so no zoo stage), `slots` at a time on
    `cores` CPUs (each unit reserves cores / slots of a CPU)."""
    path.write_text(
        f"name: scale_ray\ndata: {{dataset: digits}}\n"
        "donors: {a: {arch: resnet_tiny, training: plain, epochs: 1, seed: 0}}\n"
        f"sleep: {{count: {n}, seed: {seed}, median_s: {median_s}}}\n"
        f"resources: {{cpus_per_trial: {cores / slots}}}\n"
    )
    return path


def _cli(args: list[str]) -> list[str]:
    """A `stitchsweep` command in a process of its own that registers the benchmark's kind first."""
    code = "import sys; from tests.benchmarks.scale_ray import register; register(); from sweep.cli import main; "
    return [sys.executable, "-c", code + f"sys.exit(main({args!r}))"]


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO))


def _rss_mb(pid: int) -> tuple[float, float]:
    """The process's resident set now (VmRSS) and its peak so far (VmHWM), in MB; zeros once it is gone."""
    found = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                found[line[:5]] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return found.get("VmRSS", 0.0), found.get("VmHWM", 0.0)


def _kill_tree(pid: int) -> None:
    """SIGKILL the driver and everything it started (its embedded Ray), as a crash of its machine would."""
    import psutil

    from tests.benchmarks.loopback_cluster import kill_all

    try:
        tree = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    os.kill(pid, signal.SIGKILL)
    kill_all(tree)


def drive(args: list[str], parts_dir: Path, log: Path, kill_at_parts: int | None = None, kill=None) -> dict:
    """Run one command; poll the driver's RSS against the parts written so far (`rss`: (parts, MB) pairs) and
    its peak; once `kill_at_parts` parts exist (if given), call `kill` and go on (until it returns True: it may
    wait for its moment), or without one SIGKILL the driver (which ends the command)."""
    t0 = time.time()
    with open(log, "w") as out:
        proc = subprocess.Popen(_cli(args), stdout=out, stderr=subprocess.STDOUT, env=_env(), cwd=REPO)
        peak, killed, rss = 0.0, False, []
        while proc.poll() is None:
            now, high = _rss_mb(proc.pid)
            peak = max(peak, high)
            parts = sum(1 for _ in os.scandir(parts_dir)) if parts_dir.is_dir() else 0
            if parts and now:
                rss.append((parts, now))
            if kill_at_parts is not None and not killed and parts >= kill_at_parts:
                if kill is not None:
                    killed = kill()  # False: not yet; asked again at the next poll
                    time.sleep(0.5)
                    continue
                killed = True
                _kill_tree(proc.pid)
                proc.wait()
                break
            time.sleep(0.5)
    wall = time.time() - t0
    return {"t0": t0, "wall": wall, "rc": proc.returncode, "peak_rss_mb": peak, "killed": killed, "rss": rss}


def rss_at(samples: list[tuple[int, float]], parts: int) -> float | None:
    """The driver's RSS at the first poll that saw at least `parts` parts (None: no such poll)."""
    return next((mb for n, mb in samples if n >= parts), None)


def busy_windows(rows, t_begin: float, slots: int, width: float = 10.0) -> list[float]:
    """Busy slots (mean units running) in each `width`-second window from `t_begin` to the last unit's end."""
    import numpy as np

    start, end = rows["t_start"].to_numpy(), rows["t_end"].to_numpy()
    n = max(1, math.ceil((end.max() - t_begin) / width))
    out = []
    for k in range(n):
        lo, hi = t_begin + k * width, t_begin + (k + 1) * width
        overlap = np.clip(np.minimum(end, hi) - np.maximum(start, lo), 0, None)
        out.append(float(overlap.sum()) / width)
    return out


def rate(rows) -> float:
    """Units a second between the first unit's start and the last unit's end of `rows`."""
    span = rows["t_end"].max() - rows["t_start"].min()
    return len(rows) / span if span > 0 else float("inf")


def read_rows(results: Path):
    from analysis.reading import read_table

    register()
    return read_table(str(results), "sleep").to_pandas()


def sweep_once(workdir: Path, n: int, slots: int, median_s: float, kill_at: float | None = None) -> dict:
    """`run` N units (SIGKILLed once a fraction `kill_at` of them are recorded, then `resume`d). Returns the
    commands' figures, the rows, and the parts recorded when the driver died with their end times."""
    space = write_space(workdir / "scale_ray.yaml", n, slots, median_s)
    storage, results = workdir / "results", workdir / "results" / "scale_ray"
    parts = results / "sleep"
    cpus = ["--num-cpus", "2"]
    kill = None if kill_at is None else max(1, int(kill_at * n))
    first = drive(["run", str(space), "--storage", str(storage), *cpus], parts, workdir / "run.log", kill)
    out = {"run": first, "before_kill": {}}
    if first["killed"]:
        out["before_kill"] = read_rows(results).set_index("unit_id")["t_end"].to_dict()
        out["resume"] = drive(["resume", str(results), *cpus], parts, workdir / "resume.log")
    for cmd in ("run", "resume"):
        if cmd in out and out[cmd]["rc"] not in (0, -signal.SIGKILL):
            log = (workdir / f"{cmd}.log").read_text()[-3000:]
            raise SystemExit(f"stitchsweep {cmd} failed ({out[cmd]['rc']}):\n{log}")
    out["rows"] = read_rows(results)
    out["results"] = results
    return out


def exactly_once(out: dict, n: int) -> list[str]:
    """What breaks "every unit recorded exactly once, none that had finished run again" (empty: nothing)."""
    rows, problems = out["rows"], []
    if len(rows) != n or rows["unit_id"].nunique() != n:
        problems.append(f"{len(rows)} rows, {rows['unit_id'].nunique()} distinct ids, {n} units planned")
    if (rows["status"] != "done").any():
        problems.append(f"{int((rows['status'] != 'done').sum())} rows not done")
    ends = rows.groupby("unit_id")["t_end"].agg(set)  # a repeated id has several end times
    rerun = [u for u, t in out["before_kill"].items() if ends.get(u) != {t}]
    if rerun:
        problems.append(f"{len(rerun)} units recorded before the kill ran again, e.g. {rerun[:3]}")
    return problems


def _timed_cmd(args: list[str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(_cli(args), env=_env(), cwd=REPO, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # status: 1 while units are pending
        raise SystemExit(f"stitchsweep {args[0]} failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr}")
    return time.perf_counter() - t0


def _print_figures(out: dict, n: int, slots: int, median_s: float, workdir: Path) -> None:
    rows, first = out["rows"], out["run"]
    fresh = rows[rows["t_end"] <= first["t0"] + first["wall"]]
    d = rows["duration_s"]
    ideal = max(d.sum() / slots, d.max())
    print(f"load average: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} cores; N={n} S={slots} median={median_s}")
    startup = fresh["t_start"].min() - first["t0"]
    print(f"run: wall {first['wall']:.1f} s, fixed start-up {startup:.1f} s (to the first unit's start),"
          f" {'killed' if first['killed'] else 'rc ' + str(first['rc'])}; {len(fresh)} units at"
          f" {rate(fresh):.2f} units/s (first start to last end)")  # fmt: skip
    if not first["killed"] and ideal > 0:
        span = fresh["t_end"].max() - fresh["t_start"].min()
        print(f"ideal {ideal:.1f} s: units' span {span:.1f} s = {span / ideal:.2f}x, whole command"
              f" {first['wall'] / ideal:.2f}x")  # fmt: skip
    if "resume" in out:
        res = out["resume"]
        resumed = rows[rows["t_start"] >= res["t0"]]
        print(f"resume: wall {res['wall']:.1f} s, {len(resumed)} units at {rate(resumed):.2f} units/s"
              f" (fresh run's: {rate(fresh):.2f}); driver peak RSS {res['peak_rss_mb']:.0f} MB")  # fmt: skip
        print("exactly once:", exactly_once(out, n) or "yes")
    print(f"driver peak RSS (run): {first['peak_rss_mb']:.0f} MB")
    marks = {f: rss_at(first["rss"], int(f * n)) for f in (0.1, 0.5, 0.9)}
    if None not in marks.values():  # the slope of Tune's per-trial state, apart from the start-up's peak
        slope = (marks[0.9] - marks[0.1]) / (0.8 * n) * 1000
        print("driver RSS at 10/50/90% of the parts:", " ".join(f"{v:.0f}" for v in marks.values()),
              f"MB ({slope:+.1f} MB per 1,000 units)")  # fmt: skip
    if median_s > 0:
        windows = busy_windows(fresh, fresh["t_start"].min(), slots)
        print("busy slots per 10 s window:", " ".join(f"{w:.1f}" for w in windows))
        inner = windows[6:-2] or windows
        print(f"  after the first minute, before the last units: min {min(inner):.1f} of {slots}")
    files = sum(len(f) for _, _, f in os.walk(out["results"]))
    print(f"files under the results folder: {files} ({sum(1 for _ in os.scandir(out['results'] / 'sleep'))} parts)")
    t0 = time.perf_counter()
    read_rows(out["results"])
    print(f"sleep table loader (analysis.reading.read_table): {time.perf_counter() - t0:.2f} s")
    print(f"status: {_timed_cmd(['status', str(out['results'])]):.2f} s")
    report = _timed_cmd(["report", str(out["results"]), "--out", str(workdir / "report")])
    print(f"report: {report:.2f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", type=int, default=2000)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--median", type=float, default=0.5, help="the durations' median in seconds (0: none)")
    ap.add_argument("--kill-at", type=float, default=None, help="SIGKILL the driver at this fraction, then resume")
    ap.add_argument("--workdir", default=None, help="where the space and results go (default: a temporary folder)")
    ap.add_argument("--nodes", type=int, default=None, help="run on a loopback cluster of this many Ray nodes")
    ap.add_argument("--kill-node-at", type=float, default=None, help="with --nodes: SIGKILL a worker node then")
    a = ap.parse_args(argv)
    if a.kill_node_at is not None and (a.nodes or 0) < 2:
        ap.error(f"--kill-node-at needs --nodes of at least 2 (a worker node to kill), found --nodes {a.nodes}")
    workdir = Path(a.workdir or tempfile.mkdtemp(prefix="scale_ray_"))
    workdir.mkdir(parents=True, exist_ok=True)
    if a.nodes is not None:
        from tests.benchmarks.scale_ray_nodes import main_nodes

        return main_nodes(workdir, a.units, a.slots, a.median, a.nodes, a.kill_node_at)
    out = sweep_once(workdir, a.units, a.slots, a.median, a.kill_at)
    _print_figures(out, a.units, a.slots, a.median, workdir)
    return 1 if a.kill_at is not None and exactly_once(out, a.units) else 0


if __name__ == "__main__":
    sys.exit(main())
