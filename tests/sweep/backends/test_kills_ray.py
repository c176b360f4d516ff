"""Two faults of a long sweep on a real (embedded, 2-CPU) Ray, through the `stitchsweep` command and a plugin kind
whose units log each start: a worker that Ray's memory monitor kills (a low threshold on the node) is recorded
failed once, with what it held and what to lower, while the stage goes on; a worker sent SIGTERM is retried
as a lost worker; a driver sent SIGTERM stops within SLURM's grace with the resume line, and `resume` then
records every unit exactly once."""

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import REPO

pytestmark = [pytest.mark.ray, pytest.mark.slow]

CLI = [sys.executable, "-m", "sweep"]
GiB = 2**30

# A kind of work whose units log "<unit> <pid>" at each start: `hog*` holds $STITCHSWEEP_TEST_HOG_MB MB (then
# waits to be killed), `slow*` works $STITCHSWEEP_TEST_SLOW_S s at its first start (1 s at a later one) in a
# thread pool, which fails once its process exits, and each writes its part last. Its memory need names the
# field `rows`.
PLUGIN = """
import os
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from sweep.kinds.base import Kind, register_kind

SCHEMA = pa.schema([("unit_id", pa.string()), ("status", pa.string()), ("error", pa.string())])


def parts(sweep_dir, unit):
    return [sweep_dir.path / "chores" / (unit + ".parquet")]


def run(unit, ctx):
    from sweep.store.results import write_rows

    log = os.environ["STITCHSWEEP_TEST_ATTEMPTS"]
    again = os.path.exists(log) and any(line.split()[0] == unit for line in open(log))
    with open(log, "a") as f:
        f.write(f"{unit} {os.getpid()}\\n")
    if unit.startswith("hog"):
        held = [b"x" * 2**26 for _ in range(int(os.environ.get("STITCHSWEEP_TEST_HOG_MB", "64")) // 64)]
        time.sleep(30 if len(held) > 1 else 0)  # Ray's memory monitor kills it first
    if unit.startswith("slow"):  # handing work to a thread pool, as the worker cache's writer does
        pool, t0 = ThreadPoolExecutor(1), time.time()
        while time.time() - t0 < (1 if again else float(os.environ["STITCHSWEEP_TEST_SLOW_S"])):
            pool.submit(time.sleep, 0.05).result()  # refused once the process exits (SIGTERM)
    write_rows(parts(ctx.sweep_dir, unit)[0], [dict(unit_id=unit, status="done")], SCHEMA)
    return dict(status="done", error=None)


def need(unit, sweep):
    from sweep.planning.memory import Need

    return Need("chore", "chore " + unit, "rows", 1000, lambda n: n * 2**20, "rows")


register_kind(
    Kind("chore", "chores", "chore units", "chores", parts, run, lambda unit: "chore " + unit, section="chores",
         parse=lambda raw, ctx: tuple(raw["units"]), unit_id=lambda unit: unit, schema=SCHEMA, timing=None,
         memory=need)
)
"""


def _space(tmp_path: Path, name: str, units: list[str]) -> Path:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "chores.py").write_text(PLUGIN)
    space = {
        "name": name,
        "plugins": ["chores.py"],
        "data": {"dataset": "digits"},
        "donors": {"a": {"arch": "resnet_tiny", "training": "plain", "epochs": 1, "seed": 0}},
        "chores": {"units": units},
    }
    (src / f"{name}.yaml").write_text(yaml.safe_dump(space, sort_keys=False))
    return src / f"{name}.yaml"


def _env(tmp_path: Path, **extra) -> dict:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "STITCHSWEEP_TEST_ATTEMPTS": str(tmp_path / "attempts.log"),
        "STITCHSWEEP_TEST_SLOW_S": "60",
        **extra,
    }


def _cli(tmp_path: Path, *args, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *map(str, args)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)


def _attempts(tmp_path: Path) -> list[tuple[str, int]]:
    log = tmp_path / "attempts.log"
    lines = log.read_text().split("\n") if log.exists() else []
    return [(unit, int(pid)) for unit, pid in (line.split() for line in lines if line)]


def _rows(results: Path) -> list[dict]:
    return pq.read_table(results / "chores").to_pylist()


def test_a_worker_killed_for_memory_is_recorded_failed_once_and_the_stage_goes_on(tmp_path):
    mem = psutil.virtual_memory()
    if mem.available < 10 * GiB:
        pytest.skip(f"needs 10 GiB of available memory, found {mem.available / GiB:.1f}")
    # the node's memory monitor acts 4 GiB above what is in use now (Ray's processes take 1-2 of it): the units
    # `a` and `b` stay below, the hog goes past with 8 GiB
    threshold = (mem.total - mem.available + 4 * GiB) / mem.total
    env = _env(
        tmp_path,
        RAY_memory_usage_threshold=f"{threshold:.3f}",
        RAY_memory_monitor_refresh_ms="100",
        STITCHSWEEP_TEST_HOG_MB=str(8 * 1024),
    )
    space, results = _space(tmp_path, "oom", ["a", "hog", "b"]), tmp_path / "results" / "oom"
    run = _cli(
        tmp_path, "run", space, "--storage", tmp_path / "results", "--num-cpus", 2, "--max-concurrent", 1, env=env
    )
    out = run.stdout + run.stderr
    assert run.returncode == 1, out  # recorded, one failed: not complete
    assert Counter(u for u, _ in _attempts(tmp_path)) == {"a": 1, "hog": 1, "b": 1}, out  # never retried
    assert "3 chore units: 2 done, 1 failed, 0 pending" in run.stdout, out
    assert "chore hog: recorded failed, killed for memory: Ray's memory monitor stopped its worker (pid" in out
    assert "lost with its worker" not in out and "Caught unexpected exception" not in out, out
    rows = {r["unit_id"]: r for r in _rows(results)}
    assert sorted(rows) == ["a", "b", "hog"] and [rows[u]["status"] for u in ("a", "b")] == ["done", "done"]
    hog_pid = dict(_attempts(tmp_path))["hog"]
    error = rows["hog"]["error"]
    assert error.startswith(f"killed for memory: Ray's memory monitor stopped its worker (pid {hog_pid}), which held ")
    held = float(error.split("which held ")[1].split(" GB")[0])
    assert 3 < held < 9, error  # the hog's own memory, not the node's
    print(error)
    status = _cli(tmp_path, "status", results, env=env)
    assert status.returncode == 1, status.stdout + status.stderr
    assert f"  failed hog chore hog: {error}" in status.stdout
    assert "raise resources.memory_per_trial (fewer units share a node), or lower chores.rows (1,000 now)" in error
    assert f"finish with: stitchsweep resume {results} --failed" in status.stdout

    # the field lowered (here: the hog's memory): `resume --failed` runs the hog alone, once
    env.update(STITCHSWEEP_TEST_HOG_MB="64")
    again = _cli(tmp_path, "resume", results, "--failed", "--num-cpus", 2, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert Counter(u for u, _ in _attempts(tmp_path)) == {"a": 1, "hog": 2, "b": 1}
    assert sorted((r["unit_id"], r["status"]) for r in _rows(results)) == [
        ("a", "done"),
        ("b", "done"),
        ("hog", "done"),
    ]


def test_a_worker_sent_sigterm_is_retried_as_a_lost_worker(tmp_path):
    space, results = _space(tmp_path, "worker", ["a", "slow", "b"]), tmp_path / "results" / "worker"
    driver = subprocess.Popen(
        [*CLI, "run", str(space), "--storage", str(tmp_path / "results"), "--num-cpus", "2", "--max-concurrent", "1"],
        cwd=tmp_path,
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.time() + 300
        while "slow" not in dict(_attempts(tmp_path)):
            assert driver.poll() is None and time.time() < deadline, "the slow unit never started"
            time.sleep(0.2)
        os.kill(dict(_attempts(tmp_path))["slow"], signal.SIGTERM)  # the worker, mid-unit
        out, _ = driver.communicate(timeout=300)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 0, out
    assert "chore slow: lost with its worker or node; retrying" in out, out
    slow = [pid for unit, pid in _attempts(tmp_path) if unit == "slow"]
    assert len(slow) == 2 and slow[0] != slow[1], _attempts(tmp_path)  # again, on another worker
    assert sorted((r["unit_id"], r["status"]) for r in _rows(results)) == [
        ("a", "done"),
        ("b", "done"),
        ("slow", "done"),
    ]


def test_a_driver_sent_sigterm_stops_within_the_grace_and_resume_records_each_unit_once(tmp_path):
    units = [f"slow{i}" for i in range(6)]
    space, results = _space(tmp_path, "driver", units), tmp_path / "results" / "driver"
    env = _env(tmp_path, STITCHSWEEP_TEST_SLOW_S="4")
    log = open(tmp_path / "driver.log", "w")
    driver = subprocess.Popen(
        [*CLI, "run", str(space), "--storage", str(tmp_path / "results"), "--num-cpus", "2"],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.time() + 300
        while len(list((results / "chores").glob("*.parquet")) if results.exists() else []) < 2:
            assert driver.poll() is None and time.time() < deadline, (tmp_path / "driver.log").read_text()
            time.sleep(0.1)
        t0 = time.monotonic()
        driver.send_signal(signal.SIGTERM)
        rc = driver.wait(timeout=60)
        wall = time.monotonic() - t0
    finally:
        if driver.poll() is None:
            driver.kill()
        log.close()
    out = (tmp_path / "driver.log").read_text()
    assert rc == 143 and wall < 30, (rc, wall, out)  # SLURM's default grace: 30 s
    print(f"the driver exited {wall:.1f} s after SIGTERM")
    assert f"every finished trial is recorded. Finish with: stitchsweep resume {results}" in out, out
    assert "stitchsweep: stopped by SIGTERM (the chores stage was interrupted with " in out, out
    assert not (results / "driver.lease").exists(), "the lease is released"
    before = {p.stem for p in (results / "chores").glob("*.parquet")}
    assert 2 <= len(before) < len(units), out

    again = _cli(tmp_path, "resume", results, "--num-cpus", 2, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"6 chore units, {len(before)} already recorded, {6 - len(before)} to run" in again.stdout
    rows = _rows(results)
    assert sorted(r["unit_id"] for r in rows) == units and {r["status"] for r in rows} == {"done"}
    runs = Counter(u for u, _ in _attempts(tmp_path))
    assert all(runs[u] == 1 for u in before), runs  # a unit recorded before the stop never ran again
    assert not list(results.rglob(".tmp-*")), "no partial file may survive"
