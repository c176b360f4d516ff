"""A real two-node Ray cluster on this machine (`tests/benchmarks/loopback_cluster.py`): lose the worker node
mid-sweep, then the driver.

`ray start --head` plus a second `ray start --address` with its own CPU; the sweep joins through `--address
127.0.0.1:PORT`. The test finds and kills every process the nodes started by PID (never `ray stop`).
"""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import analysis
from sweep.config.space import parse_space
from tests.benchmarks.loopback_cluster import Cluster, running_trial

pytestmark = [pytest.mark.ray, pytest.mark.slow]

CLI = [sys.executable, "-m", "sweep"]


@pytest.fixture
def cluster():
    c = Cluster(uuid.uuid4().hex[:8])
    try:
        c.start_head()
        yield c
    finally:
        c.stop()
    assert not c.leftovers(), "a Ray process of the test outlived it"


def _parts(results: Path) -> set[str]:
    """The trial ids recorded: loose parts, or compacted after a stage."""
    from sweep.store.compact import recorded_parts
    from sweep.store.storage import open_root

    return {name.removesuffix(".parquet") for name in recorded_parts(open_root(results / "trials"))}


def _driver(space: Path, storage: Path, address: str, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [*CLI, "run", str(space), "--storage", str(storage), "--address", address],
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _wait_for_parts(results: Path, n: int, driver: subprocess.Popen, log: Path, timeout: float = 600) -> None:
    deadline = time.time() + timeout
    while len(_parts(results)) < n:
        assert driver.poll() is None, log.read_text()
        assert time.time() < deadline, f"fewer than {n} trials finished in time\n{log.read_text()}"
        time.sleep(0.05)


def _wait_for_trial_on(tag: str, driver: subprocess.Popen, log: Path, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while not running_trial(tag):
        assert driver.poll() is None, log.read_text()
        assert time.time() < deadline, f"no trial ran on node {tag}\n{log.read_text()}"
        time.sleep(0.1)


def test_losing_a_worker_node_and_then_the_driver_loses_no_trial(cluster, tiny_space, write_space, tmp_path):
    tiny_space["stitching"]["stitch_points"] = "all"
    tiny_space["stitching"]["objectives"] = ["tlm", "dm"]
    # long enough that the worker node's actors start and take trials: the run's first worker, kept from the
    # zoo stage, would otherwise run every trial before they are up
    tiny_space["stitching"]["epochs"] = 12
    space = write_space(tiny_space)
    storage = tmp_path / "results"  # both nodes are on this machine: the folder is shared storage for them
    results = storage / "tiny"
    planned = {t.trial_id for t in parse_space(tiny_space).trials}
    assert len(planned) == 12
    worker = cluster.add_worker("worker1")
    assert cluster.alive_nodes() == 2

    # 1. The worker node's raylet dies mid-sweep: its trial is retried elsewhere, every trial ends exactly once.
    log = tmp_path / "driver1.log"
    driver = _driver(space, storage, cluster.address, log)
    try:
        _wait_for_parts(results, 2, driver, log)
        _wait_for_trial_on(worker, driver, log)
        cluster.kill_raylet(worker)
        rc = driver.wait(timeout=900)
    finally:
        if driver.poll() is None:
            driver.kill()
    out = log.read_text()
    assert rc == 0, out
    assert _parts(results) == planned
    trials = analysis.load_trials(results)
    assert len(trials) == len(planned) and trials["trial_id"].is_unique
    assert (trials["status"] == "done").all(), trials["error"].tolist()
    finished = [line for line in out.splitlines() if line.startswith("[stitch ") and ": done" in line]
    assert len(finished) == len(planned), out  # each trial reported done once: a retry is not a second record
    assert "lost with its worker or node; retrying" in out, out
    # the nodes are named apart (`stitchsweep_node_*`): units were pinned, a lost node's moved, Ray honoured each
    assert "placement (units pinned to the node holding their halves)" in out, out
    assert "ran elsewhere than pinned" not in out, out
    # Ray marks the dead raylet's node dead after its health checks fail; with reused workers the sweep can
    # finish before that happens
    deadline = time.time() + 120
    while cluster.alive_nodes() != 1:
        assert time.time() < deadline, "the killed node is still alive for Ray"
        time.sleep(2)

    # 2. A node rejoins, a grown sweep starts, and its driver is SIGKILLed mid-sweep; `resume` finishes it.
    cluster.add_worker("worker2")
    tiny_space["stitching"]["objectives"] = ["tlm", "dm", "dm+tlm"]
    grown = write_space(tiny_space)
    planned = {t.trial_id for t in parse_space(tiny_space).trials}
    assert len(planned) == 18
    log = tmp_path / "driver2.log"
    driver = _driver(grown, storage, cluster.address, log)
    try:
        # with reused workers the 6 new trials take a few seconds in all: kill at the first of them
        _wait_for_parts(results, 13, driver, log)
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert 13 <= len(_parts(results)) < 18, "the kill should land mid-sweep"
    resumed = subprocess.run(
        [*CLI, "resume", str(results), "--address", cluster.address], capture_output=True, text=True, timeout=900
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "18 trials: 18 done, 0 failed, 0 pending" in resumed.stdout
    assert _parts(results) == planned
    assert not list(results.rglob(".tmp-*")), "no partial file may survive"
    trials = analysis.load_trials(results)
    assert len(trials) == 18 and trials["trial_id"].is_unique


def test_a_plugin_reaches_a_second_node_only_through_ray(cluster, tmp_path):
    """The plugin file lies in a folder no node's path names; the worker node imports Ray's shipped copy."""
    from tests.project.test_plugins import LOG_ENV, plugin_space

    space, log = plugin_space(tmp_path / "src"), tmp_path / "imports.log"
    os.environ[LOG_ENV] = str(log)  # the nodes started below inherit it, and so their workers
    try:
        worker = cluster.add_worker("worker1")
        assert cluster.alive_nodes() == 2
        out = subprocess.run(
            [*CLI, "run", str(space), "--storage", str(tmp_path / "results"), "--address", cluster.address],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        del os.environ[LOG_ENV]
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 trials: 2 done" in out.stdout, out.stdout
    lines = [line.split("\t") for line in log.read_text().splitlines()]
    # imported on the worker node from Ray's copy (its processes carry the node's tag)
    assert any("runtime_resources" in path and tag == worker for path, tag in lines), lines


def test_plan_counts_the_units_each_node_of_the_cluster_holds(cluster, tiny_space, write_space, tmp_path):
    """`plan --address`: joins the cluster (its token, as `run`), reads both nodes' memory for tasks, leaves."""
    cluster.add_worker("worker1")
    space = write_space(tiny_space)
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}  # plan turns token mode on itself
    out = subprocess.run(
        [*CLI, "plan", str(space), "--address", cluster.address], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (line,) = [ln for ln in out.stdout.splitlines() if "a trial unit needs about" in ln]
    counts = line.split("the cluster holds ")[1]
    names = [part.split(" (")[0] for part in counts.split(": ")[1].split(", ")]
    assert counts.count("GiB for tasks") == 2 and len(set(names)) == 2, line  # each node by address and id
    assert cluster.alive_nodes() == 2  # the plan left the cluster as it found it


def test_60_sleep_units_lose_a_worker_node_at_30_percent_and_each_is_recorded_once(tmp_path):
    """`tests/benchmarks/scale_ray.py --nodes 2 --kill-node-at 0.3`, small: the worker node's every process is
    SIGKILLed once 18 of 60 units are recorded and one runs there; Tune retries the lost trials on the head."""
    from tests.benchmarks import scale_ray, scale_ray_nodes

    out = scale_ray_nodes.sweep_on_nodes(tmp_path, 60, 8, 0.5, nodes=2, kill_at=0.3)
    log = (tmp_path / "run.log").read_text()
    assert out["run"]["rc"] == 0 and "resume" not in out, log  # retried within the run, no stage failed
    assert out["lost"] and 18 <= out["lost"]["parts"] < 60, log  # killed mid-sweep, not after the end
    assert out["retries"] >= 1, log  # the kill cut a unit short: Tune retried it
    assert scale_ray.exactly_once(out, 60) == []
    assert out["leftovers"] == 0, "a Ray process of the test outlived it"
