"""The engine on a real (embedded, 2-CPU) Ray: a whole sweep, a rerun that skips, a driver SIGKILL + resume.

Each test drives the `stitchsweep` command in a subprocess, as a user would; Ray never runs in the pytest
process itself.
"""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import analysis
from sweep.config.space import parse_space
from sweep.store.compact import recorded_parts
from sweep.store.results import write_rows
from sweep.store.schema import trial_schema
from sweep.store.storage import open_root
from tests.benchmarks.loopback_cluster import kill_all

pytestmark = [pytest.mark.ray, pytest.mark.slow]

CLI = [sys.executable, "-m", "sweep"]


def _cli(*args, check=True, timeout=600, env=None) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def _parts(results: Path) -> dict[str, Path]:
    """Trial id -> the file recording it: its part, or the compacted file holding it (after a stage)."""
    held = recorded_parts(open_root(results / "trials"))
    return {name.removesuffix(".parquet"): Path(loc.path) for name, loc in held.items()}


def test_sweep_runs_every_trial_once_and_a_rerun_skips_them(tiny_space, write_space, tmp_path):
    tiny_space["resources"] = {"memory_per_trial": 0.25}  # Ray reserves it per trial: every trial still runs
    space = write_space(tiny_space)
    storage = tmp_path / "results"
    results = storage / "tiny"
    node = tmp_path / "node"  # the node's cache folder
    first = _cli("run", space, "--storage", storage, "--num-cpus", 2, env={"STITCHSWEEP_CACHE_DIR": str(node)})
    out = first.stdout
    planned = {t.trial_id for t in parse_space(tiny_space).trials}
    assert set(_parts(results)) == planned
    assert "Ray: a local node with 2 CPUs" in out
    assert "[stitch 4/4" in out and "4 done, 0 failed, 0 pending" in out
    # the whole sweep's counts after each stage: the donor, then its 4 trials
    assert "[sweep] 1/5 finished, 0 running, 4 pending" in out and "[sweep] 5/5 finished, 0 running, 0 pending" in out
    # what the driver does before the first unit, and a numeric ETA once the donor has finished
    assert (
        "[sweep] starting Ray (a local node) and importing Tune" in out
        and "[sweep] stitch: 4 unit(s), on a worker of" in out
    )
    assert re.search(r"\[sweep\] 1/5 finished, 0 running, 4 pending; \S+ elapsed, ETA \d", out), out
    # Tune reuses the workers (2 CPUs, 1 per trial: at most 2 processes for 4 trials), whose caches serve the
    # trials after their first: the donor, the splits and the shared fronts' activations
    workers = re.search(r"\[stitch\] 4 trial units ran in (\d+) worker process\(es\); worker cache: (\d+) hits", out)
    assert workers and int(workers.group(1)) <= 2 and int(workers.group(2)) > 0, out
    assert list(node.glob("*.pt")), "two trials read each point's halves: their activations are the node's files"
    # none of Ray's lines that contradict or repeat ours
    for noise in ("Token authentication is enabled", "Connecting to existing", "Wrote the latest", "Tuner.restore"):
        assert noise not in first.stdout + first.stderr, noise
    trials = analysis.load_trials(results)
    assert (trials["status"] == "done").all(), trials["error"].tolist()
    assert len(analysis.load_donors(results)) == 1

    mtimes = {k: p.stat().st_mtime_ns for k, p in _parts(results).items()}
    rerun = _cli("run", space, "--storage", storage, "--num-cpus", 2)
    again = rerun.stdout
    assert "4 already recorded, 0 to run" in again
    assert "Ray: a local node" not in rerun.stdout + rerun.stderr  # nothing to do: Ray is not even started
    assert {k: p.stat().st_mtime_ns for k, p in _parts(results).items()} == mtimes

    status = _cli("status", results).stdout
    assert "4 trials: 4 done, 0 failed, 0 pending" in status

    # A failed trial: `run` leaves it (exit 1, with the way out), `resume --failed` reruns just that one.
    victim = sorted(planned)[0]
    row = analysis.load_trials(results).set_index("trial_id").loc[victim]
    write_rows(
        results / "trials" / f"{victim}.parquet",
        [
            {
                "trial_id": victim,
                "status": "failed",
                "error": "RuntimeError: injected",
                "front": row["front"],
                "end": row["end"],
                "front_point": row["front_point"],
                "objective": row["objective"],
            }
        ],
        trial_schema(),
    )
    failed_run = _cli("run", space, "--storage", storage, "--num-cpus", 2, check=False)
    assert failed_run.returncode == 1
    assert "3 done, 1 failed, 0 pending" in failed_run.stdout and "RuntimeError: injected" in failed_run.stdout
    assert f"stitchsweep resume {results} --failed" in failed_run.stdout
    retried = _cli("resume", results, "--failed", "--num-cpus", 2).stdout
    assert "1 to run" in retried and "4 done, 0 failed, 0 pending" in retried

    report = tmp_path / "report"
    _cli("report", results, "--out", report)
    page = (report / "index.html").read_text()
    assert "vegaEmbed" in page and "cdn.jsdelivr" not in page  # the JavaScript is inline: works offline
    assert "zoo:plain_a -&gt; zoo:plain_a" in page or "zoo:plain_a -> zoo:plain_a" in page
    assert (report / "stitching.png").stat().st_size > 1000
    assert (report / "stitching_zoo_plain_a__zoo_plain_a.png").exists()


def test_grown_space_runs_only_the_new_trials(tiny_space, write_space, tmp_path):
    tiny_space["stitching"]["objectives"] = ["dm"]
    storage = tmp_path / "results"
    env = {"STITCHSWEEP_CACHE_DIR": str(tmp_path / "node")}
    first = _cli("run", write_space(tiny_space), "--storage", storage, "--num-cpus", 2, env=env).stdout
    assert "[stitch 1/2" in first and "[stitch 2/2" in first and "2 done, 0 failed, 0 pending" in first
    assert not list((storage / "tiny" / "_ray").glob("*")), "records of a clean run are removed"
    fed = sorted((tmp_path / "node").glob("*.pt"))  # the donor stage's evaluation feeds the trials' fronts
    tiny_space["stitching"]["stitch_points"] = ["layer1.0", "layer2.0", "layer3.1"]
    out = _cli("run", write_space(tiny_space), "--storage", storage, "--num-cpus", 2, env=env).stdout
    assert "3 trials, 2 already recorded, 1 to run" in out
    assert len(_parts(storage / "tiny")) == 3
    # the donors are recorded, so no donor stage feeds the new trial; no half of it is read by another trial of
    # the run, so it writes no node file either
    assert sorted((tmp_path / "node").glob("*.pt")) == fed, "no half is read by two trials of a run"


def test_driver_sigkill_then_resume_leaves_one_row_per_trial(tiny_space, write_space, tmp_path):
    tiny_space["stitching"]["stitch_points"] = "all"
    tiny_space["stitching"]["objectives"] = ["tlm", "dm"]
    tiny_space["stitching"]["epochs"] = 2
    space = write_space(tiny_space)
    storage = tmp_path / "results"
    results = storage / "tiny"
    planned = {t.trial_id for t in parse_space(tiny_space).trials}
    assert len(planned) == 12

    log = open(tmp_path / "driver.log", "w")
    driver = subprocess.Popen(
        [*CLI, "run", str(space), "--storage", str(storage), "--num-cpus", "2"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    ray_procs: list[psutil.Process] = []
    try:
        deadline = time.time() + 400
        while len(_parts(results)) < 3:
            assert driver.poll() is None, (tmp_path / "driver.log").read_text()
            assert time.time() < deadline, "no trial finished in time"
            time.sleep(0.5)
        # Everything this driver started (raylet, GCS, workers) is ours to clean up after the SIGKILL.
        ray_procs = psutil.Process(driver.pid).children(recursive=True)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        kill_all(ray_procs)
        if driver.poll() is None:
            driver.kill()
        log.close()
    interrupted = set(_parts(results))
    assert 3 <= len(interrupted) < len(planned), "the kill should land mid-sweep"

    out = _cli("resume", results, "--num-cpus", 2).stdout
    assert f"{len(interrupted)} already recorded" in out or "already recorded" in out
    parts = _parts(results)
    assert set(parts) == planned
    assert not [p for p in results.rglob(".tmp-*")], "no partial file may survive"
    trials = analysis.load_trials(results)
    assert len(trials) == len(planned) and trials["trial_id"].is_unique
    assert (trials["status"] == "done").all(), trials["error"].tolist()


def test_gpu_request_on_a_cluster_without_gpus_is_refused_before_scheduling(tiny_space, write_space, tmp_path):
    tiny_space["resources"] = {"gpus_per_trial": 1}
    storage = tmp_path / "results"
    proc = _cli("run", write_space(tiny_space), "--storage", storage, "--num-cpus", 2, check=False)
    assert proc.returncode == 2
    assert (
        "resources.gpus_per_trial: expected at most the 0 GPUs of the largest node of this Ray cluster, found 1.0"
    ) in proc.stderr
    assert not list((storage / "tiny" / "trials").glob("*.parquet"))


def test_more_memory_per_trial_than_a_node_gives_is_refused_before_scheduling(tiny_space, write_space, tmp_path):
    tiny_space["resources"] = {"memory_per_trial": 100000}
    storage = tmp_path / "results"
    proc = _cli("run", write_space(tiny_space), "--storage", storage, "--num-cpus", 2, check=False)
    assert proc.returncode == 2
    assert "resources.memory_per_trial: expected at most the " in proc.stderr and "found 100000" in proc.stderr
    assert not list((storage / "tiny" / "trials").glob("*.parquet"))


def test_ctrl_c_during_the_zoo_stops_the_sweep_instead_of_starting_the_stitching_stage(
    tiny_space, write_space, tmp_path
):
    tiny_space["donors"]["plain_a"]["epochs"] = 30  # long enough to be interrupted mid-training
    space = write_space(tiny_space)
    storage = tmp_path / "results"
    log = open(tmp_path / "driver.log", "w")
    driver = subprocess.Popen(
        [*CLI, "run", str(space), "--storage", str(storage), "--num-cpus", "2"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 300
        while "epoch 2/30" not in (tmp_path / "driver.log").read_text():
            assert driver.poll() is None, (tmp_path / "driver.log").read_text()
            assert time.time() < deadline, "the donor never started training"
            time.sleep(0.5)
        os.kill(driver.pid, signal.SIGINT)
        rc = driver.wait(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
        log.close()
    out = (tmp_path / "driver.log").read_text()
    assert rc == 130, out
    assert "Tuner.restore" not in out and "Resume experiment with" not in out  # ours is `stitchsweep resume`
    assert "interrupted" in out and f"Finish with: stitchsweep resume {storage / 'tiny'}" in out
    assert "[stitch 1/" not in out and "[sweep] stitch: " not in out  # the stage after never began
    assert not list((storage / "tiny" / "trials").glob("*.parquet"))


def test_each_stage_compacts_its_parts_and_resume_reruns_nothing(tiny_space, write_space, tmp_path):
    """At the end of each stage its done parts go into one compacted file per table; the sweep's folder holds
    only the tables it wrote; `resume` finds every unit recorded in the compacted files and runs nothing; a
    glob of the folder counts each trial once."""
    import pyarrow.dataset as ds

    tiny_space["stitching"]["objectives"] = ["dm"]
    tiny_space["donors"]["plain_a"]["epochs"] = 1  # what is measured here is the bookkeeping, not the donor
    storage = tmp_path / "results"
    results = storage / "tiny"
    every = {"STITCHSWEEP_COMPACT_ABOVE": "0"}  # compact every table (the default waits for 100 files)
    out = _cli("run", write_space(tiny_space), "--storage", storage, "--num-cpus", 2, env=every).stdout
    assert "[zoo] compacted 2 parts into 2 file(s)" in out, out  # the donor's row, its curves: a file per table
    assert "[stitch] compacted 2 parts into 1 file(s)" in out, out  # two dm trials: rows, no training curves
    assert "2 done, 0 failed, 0 pending" in out
    assert any((results / "_cache_keys").glob("*.json")), "the workers record the node-cache files they use"
    tables = {p.name for p in results.iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert tables <= {"donors", "trials", "curves", "donor_curves", "stitchers"} and all(
        any((results / t).iterdir()) for t in tables
    ), tables
    (compacted,) = (results / "trials").glob("*.parquet")
    assert compacted.name.startswith("@compacted-") and set(_parts(results)) == {
        t.trial_id for t in parse_space(tiny_space).trials
    }
    stamp = compacted.stat().st_mtime_ns
    again = _cli("resume", results, "--num-cpus", 2, env=every).stdout
    assert "2 already recorded, 0 to run" in again and "compacted" not in again
    assert compacted.stat().st_mtime_ns == stamp and len(list((results / "trials").glob("*.parquet"))) == 1
    glob = ds.dataset([str(p) for p in results.rglob("*.parquet")], format="parquet")
    trials = analysis.load_trials(results)
    assert len(trials) == 2 and trials["trial_id"].is_unique
    every = sum(len(df) for name, df in analysis.load(results).items() if name != "problems")
    assert glob.count_rows() == every  # the snapshot (`_snapshot/*.snapshot`) is out of the glob
