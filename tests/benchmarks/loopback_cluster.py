"""A real Ray cluster of several nodes on this machine, for tests and benchmarks: `ray start --head` plus
`ray start --address` per worker node; a sweep joins through `--address 127.0.0.1:PORT`.

Nothing leaves the host (Ray 2.60 still advertises the machine's own address for every node whatever
`--node-ip-address` says, and its GCS listens on every interface: run this where that is fine). The nodes
sharing one address, each is started with a resource of its own, `stitchsweep_node_<name>`, that names it to
the sweep's placement (`sweep.backends.placement`); with `own_tmp`, each node's processes have a temporary
folder of their own (`TMPDIR`), so each has its own node cache folder, as separate machines do. Every process a
`ray start` leaves behind carries a marker in its environment, so its processes are found and killed by PID
(never `ray stop`, which would also stop other users' clusters on this machine).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil

RAY = str(Path(sys.executable).with_name("ray"))
MARK = "STITCHSWEEP_TEST_NODE"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def marked(tag: str) -> list[psutil.Process]:
    """Live processes whose environment carries MARK=tag (what one `ray start` spawned, and their workers)."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(MARK) == tag:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return found


def running_trial(tag: str) -> bool:
    """Whether a process of the node tagged `tag` is running a Tune trial's trainable now."""
    for p in marked(tag):
        try:
            if "ImplicitFunc.train" in " ".join(p.cmdline()):  # Ray's title for an actor running `train`
                return True
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
    return False


def kill_all(procs: list[psutil.Process]) -> None:
    """SIGKILL each of `procs` (gone already: fine) and wait for them."""
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=30)


def _with_children(procs: list[psutil.Process]) -> list[psutil.Process]:
    """`procs` and their descendants, once each (Ray starts its agents with an environment of their own, so
    they carry no tag)."""
    out = list(procs)
    for p in procs:
        try:
            out += p.children(recursive=True)
        except psutil.NoSuchProcess:
            pass
    return list({p.pid: p for p in out}.values())


class Cluster:
    """Ray nodes started with `ray start`, each tagged so that it can be found and killed by PID."""

    def __init__(self, run_id: str, cpus_per_node: int = 1, own_tmp: bool = False) -> None:
        self.run_id = run_id
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.cpus = cpus_per_node
        self.tags: list[str] = []
        self.temp_dir = f"/tmp/ray-{run_id}"
        self.orphans: list[psutil.Process] = []  # children of a killed raylet (Ray's agents outlive it)
        self.own_tmp = own_tmp
        self.tmps: dict[str, str] = {}  # node name -> its TMPDIR (with `own_tmp`)

    def _start(self, tag: str, *args: str) -> None:
        name = tag.removeprefix(f"{self.run_id}-")
        # A joining node sends the head's token (~/.ray/auth_token, written by `ray start --head`) only in
        # token mode; the driver (`stitchsweep run --address`) turns that mode on by itself.
        env = {**os.environ, MARK: tag, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token"}
        if self.own_tmp:
            self.tmps[name] = env["TMPDIR"] = f"/tmp/ssn-{self.run_id}-{name}"
            os.makedirs(self.tmps[name], exist_ok=True)
        self.tags.append(tag)
        own = f'--resources={{"stitchsweep_node_{name}": 1}}'
        subprocess.run(
            [RAY, "start", *args, f"--num-cpus={self.cpus}", own, "--disable-usage-stats"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
            timeout=180,
        )

    def start_head(self) -> str:
        tag = f"{self.run_id}-head"
        self._start(
            tag,
            "--head",
            "--node-ip-address=127.0.0.1",
            f"--port={self.port}",
            "--include-dashboard=false",
            "--temp-dir",
            self.temp_dir,
        )
        return tag

    def add_worker(self, name: str) -> str:
        tag = f"{self.run_id}-{name}"
        self._start(tag, f"--address={self.address}", "--node-ip-address=127.0.0.1")
        return tag

    def kill_raylet(self, tag: str) -> None:
        """SIGKILL one node's raylet: the node is lost to the cluster (its agents are reaped by `stop`)."""
        (raylet,) = [p for p in marked(tag) if p.name() == "raylet"]
        self.orphans += raylet.children(recursive=True)
        raylet.send_signal(signal.SIGKILL)

    def kill_node(self, tag: str) -> list[int]:
        """SIGKILL every process of one node at once (raylet, agents, workers), as the loss of its machine
        would. Returns their PIDs."""
        procs = _with_children(marked(tag))
        kill_all(procs)
        return [p.pid for p in procs]

    def alive_nodes(self) -> int:
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                f"import ray, json; ray.init(address={self.address!r}, log_to_driver=False);"
                "print('alive nodes:', sum(n['Alive'] for n in ray.nodes()))",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "RAY_AUTH_MODE": "token"},
        )
        # Ray may print its own lines too (e.g. about a dying node's lagging heartbeats)
        (line,) = [ln for ln in out.stdout.splitlines() if ln.startswith("alive nodes:")]
        return int(line.split(":")[1])

    def stop(self) -> None:
        """Kill, by PID, every process the nodes started: the tagged ones, and their children."""
        kill_all(_with_children(self.orphans + [p for tag in self.tags for p in marked(tag)]))
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        for tmp in self.tmps.values():
            shutil.rmtree(tmp, ignore_errors=True)

    def leftovers(self) -> list[psutil.Process]:
        """The nodes' tagged processes still alive (none after `stop`)."""
        return [p for tag in self.tags for p in marked(tag)]
