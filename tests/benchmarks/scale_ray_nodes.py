"""`scale_ray.py --nodes K [--kill-node-at F]`: the sleeping units through `stitchsweep run --address` on a
loopback cluster of K Ray nodes on this machine (`loopback_cluster.py`: a head and K - 1 worker nodes, the
machine's cores shared among them), the last worker node SIGKILLed whole (raylet, agents and workers, as the
loss of its machine) once a fraction F of the parts exist and a unit runs there. Tune retries the trials lost
with it on the nodes left; if the command fails instead, `resume --address` finishes the sweep (and the run
counts as failed). Checks: every unit recorded exactly once, none recorded before the kill ran again.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/scale_ray.py --units 2000 --slots 16 --nodes 2 --kill-node-at 0.3
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from tests.benchmarks.loopback_cluster import Cluster, running_trial
from tests.benchmarks.scale_ray import drive, exactly_once, rate, read_rows, write_space

RETRY = "lost with its worker or node; retrying"


def _snapshot(results: Path) -> dict:
    """unit id -> end time of every row recorded now (the sweep goes on writing: retry a read that met a part
    being written)."""
    for attempt in range(5):
        try:
            return read_rows(results).set_index("unit_id")["t_end"].to_dict()
        except Exception:
            if attempt == 4:
                raise
            time.sleep(0.2)
    return {}


def sweep_on_nodes(workdir: Path, n: int, slots: int, median_s: float, nodes: int, kill_at: float | None) -> dict:
    """Run N units on a fresh loopback cluster of `nodes` nodes (the last worker node killed once a fraction
    `kill_at` of the parts exist), `resume` if the run failed; stop the cluster. Returns the figures, the
    rows, those recorded when the node was killed (`before_kill`), the killed processes (`lost`) and the
    retries in the driver's log."""
    cores = os.cpu_count() or 2
    cluster = Cluster(uuid.uuid4().hex[:8], cpus_per_node=max(1, cores // nodes))
    try:
        cluster.start_head()
        workers = [cluster.add_worker(f"worker{i}") for i in range(1, nodes)]
        out = _run(cluster, workers[-1] if workers else None, workdir, n, slots, median_s, kill_at, cores)
    finally:
        cluster.stop()
    out["leftovers"] = len(cluster.leftovers())  # the nodes' processes still alive after `stop` (0)
    return out


def _run(cluster: Cluster, victim, workdir: Path, n, slots, median_s, kill_at, cores) -> dict:
    space = write_space(workdir / "scale_ray.yaml", n, slots, median_s, cores=cores)
    storage, results = workdir / "results", workdir / "results" / "scale_ray"
    address = ["--address", cluster.address]
    lost: dict = {}

    def kill() -> bool:
        if not running_trial(victim):  # a loss that interrupts no unit would test no retry: wait for one
            return False
        lost["parts"] = sum(1 for _ in os.scandir(results / "sleep"))
        lost["pids"] = cluster.kill_node(victim)
        lost["t"] = time.time()
        lost["before"] = _snapshot(results)
        return True

    at = None if kill_at is None or victim is None else max(1, int(kill_at * n))
    cmd = ["run", str(space), "--storage", str(storage), *address]
    first = drive(cmd, results / "sleep", workdir / "run.log", at, kill)
    out = {"run": first, "before_kill": lost.get("before", {}), "lost": lost, "results": results}
    logs = [workdir / "run.log"]
    if first["rc"] != 0:
        out["resume"] = drive(["resume", str(results), *address], results / "sleep", workdir / "resume.log")
        logs.append(workdir / "resume.log")
        if out["resume"]["rc"] != 0:
            raise SystemExit(f"stitchsweep resume failed:\n{logs[-1].read_text()[-3000:]}")
    text = "\n".join(log.read_text() for log in logs)
    out["retries"] = text.count(RETRY)
    out["again"] = text.count("ray error; it runs again later")  # Tune gave up on it; the stage ran it again
    out["skipped"] = sum(1 for line in text.splitlines() if line.startswith("[sleep ") and ": skipped" in line)
    out["rows"] = read_rows(results)
    return out


def main_nodes(workdir: Path, n: int, slots: int, median_s: float, nodes: int, kill_at: float | None) -> int:
    """Run, print the figures and the check; 1 when a unit was lost, repeated or rerun."""
    out = sweep_on_nodes(workdir, n, slots, median_s, nodes, kill_at)
    rows, run, lost = out["rows"], out["run"], out["lost"]
    print(f"load average: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} cores; N={n} S={slots}"
          f" median={median_s}; {nodes} nodes")  # fmt: skip
    print(f"run: wall {run['wall']:.1f} s, rc {run['rc']}; {len(rows)} units at {rate(rows):.2f} units/s"
          f" (first start to last end)")  # fmt: skip
    if lost:
        pids = set(lost["pids"])
        on_victim = rows[rows["worker_pid"].isin(pids) & (rows["t_end"] <= lost["t"])]
        print(f"worker node killed at {lost['t'] - run['t0']:.1f} s, {lost['parts']} parts written ({len(pids)}"
              f" processes killed); just after: {len(lost['before'])} units recorded, {len(on_victim)} of them"
              " on that node")  # fmt: skip
    print(f"retries seen: {out['retries']} trials lost with their node and retried; {out['skipped']} retried"
          f" units found their part written and skipped; {out['again']} given up by Tune, run again by the"
          " stage")  # fmt: skip
    if "resume" in out:
        print(f"the run failed; resume: wall {out['resume']['wall']:.1f} s, rc {out['resume']['rc']}")
    problems = exactly_once(out, n)
    print("exactly once:", problems or "yes")
    return 1 if problems else 0
