"""The embedded Ray node (`sweep.backends.node`): the processes it starts and leaves behind.

Each test runs a driver in a subprocess, as `stitchsweep run` does; Ray never runs in the pytest process.
"""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]

DRIVER = """
import json, os, sys, time
import psutil, ray
from sweep.backends import node

node.begin_lean(2)
from ray import tune  # noqa: F401  (what the driver imports while the node starts)
node.start_lean(2)
procs = psutil.Process().children(recursive=True)
answer = ray.get(ray.remote(lambda: 6 * 7).remote())
print(json.dumps({
    "answer": answer,
    "cpus": ray.cluster_resources().get("CPU"),
    "auth": os.environ.get("RAY_AUTH_MODE"),
    "pids": [p.pid for p in procs],
    "cmdlines": [" ".join(p.cmdline()) for p in procs if p.is_running()],
}), flush=True)
if sys.argv[1] == "stop":
    node.stop_lean()
    print(json.dumps({"alive": [p.pid for p in procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]}))
else:
    time.sleep(600)  # killed by the test
"""


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def test_the_node_runs_work_without_the_monitor_log_monitor_or_api_server_and_stops_every_process(tmp_path):
    env = {**os.environ}
    env.pop("RAY_AUTH_MODE", None)
    out = subprocess.run(
        [sys.executable, "-c", DRIVER, "stop"], capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    started, stopped = (json.loads(line) for line in out.stdout.strip().splitlines()[-2:])
    assert started["answer"] == 42 and started["cpus"] == 2
    assert started["auth"] == "token"  # token authentication, as ray.init() would have it
    cmdlines = started["cmdlines"]
    assert any("gcs_server" in c for c in cmdlines) and any("raylet" in c for c in cmdlines), cmdlines
    for absent in ("autoscaler/_private/monitor.py", "log_monitor.py", "dashboard/dashboard.py"):
        assert not any(absent in c for c in cmdlines), (absent, cmdlines)
    assert stopped["alive"] == [], [c for c in cmdlines]
    assert "Connecting to existing" not in out.stderr + out.stdout


def test_full_ray_starts_the_node_as_ray_init_does(tmp_path):
    env = {**os.environ, "STITCHSWEEP_FULL_RAY": "1"}
    out = subprocess.run(
        [sys.executable, "-c", DRIVER, "stop"], capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    started = json.loads(out.stdout.strip().splitlines()[-2])
    assert started["answer"] == 42
    assert any("autoscaler/_private/monitor.py" in c for c in started["cmdlines"]), started["cmdlines"]
    assert any("log_monitor.py" in c for c in started["cmdlines"]), started["cmdlines"]


def test_a_driver_killed_leaves_none_of_the_nodes_processes_behind(tmp_path):
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, "wait"], stdout=subprocess.PIPE, text=True, cwd=tmp_path, start_new_session=True
    )
    pids: list[int] = []
    try:
        line = "Ray: ..."
        while line and not line.startswith("{"):  # after the node's own line
            line = driver.stdout.readline()
        assert line, "the driver ended before it started its node"
        started = json.loads(line)
        pids, names = started["pids"], dict(zip(started["pids"], started["cmdlines"]))
        assert len(_alive(pids)) >= 3  # GCS, raylet, its agents and workers
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
        # The GCS, the raylet and the workers go at once (the reaper); the raylet's two agents notice their
        # raylet is gone about a minute later, as they do under `ray.init()`, and are not waited for here.
        core = [p for p in pids if not any(a in names.get(p, "") for a in ("DashboardAgent", "RuntimeEnvAgent"))]
        assert len(core) >= 2
        deadline = time.time() + 30
        while _alive(core) and time.time() < deadline:
            time.sleep(0.5)
        assert _alive(core) == [], [names.get(p) for p in _alive(core)]
    finally:
        for pid in _alive(pids):
            os.kill(pid, signal.SIGKILL)
        if driver.poll() is None:
            driver.kill()


PRESTARTED = """
import json, os, time
import psutil, ray
from sweep.backends import node

node.begin_lean(2)
from ray.tune.execution.class_cache import _ActorClassCache
import sweep.backends.ray  # noqa: F401  (what a run imports: Tune's actor classes on this node)
node.start_lean(2)

def idle():
    return {p.pid for p in psutil.Process().children(recursive=True) if p.cmdline()[:1] == ["ray::IDLE"]}

deadline = time.time() + 60
while len(idle()) < 2 and time.time() < deadline:  # the raylet starts one worker per CPU
    time.sleep(0.2)
before = idle()

class Unit:
    def pid(self):
        return os.getpid()

actor = _ActorClassCache().get(Unit).remote()  # as Tune's controller makes a trial's actor
print(json.dumps({"prestarted": sorted(before), "actor": ray.get(actor.pid.remote())}), flush=True)
node.stop_lean()
"""


def test_a_trial_actor_takes_a_worker_the_node_started_with_it(tmp_path):
    """Tune gives trial actors a runtime environment of their own, which the workers the raylet starts with the
    node do not have: the first trial then waited for a fresh worker's imports."""
    out = subprocess.run([sys.executable, "-c", PRESTARTED], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(seen["prestarted"]) == 2
    assert seen["actor"] in seen["prestarted"]
