"""How many of a sweep's units compute a frozen half again on another node, with units placed by Ray (before)
and pinned to the node that holds their halves (after): `stitchsweep run --address` on a loopback cluster of two
Ray nodes on this machine (`loopback_cluster.py`, one CPU each, each node with a temporary folder, so a node
cache folder, of its own, as two machines have), once with `STITCHSWEEP_PLACEMENT=off` and once with it on
(the default), each on a fresh cluster and into a fresh results folder.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/placement_run.py [--work DIR] [--donors 8] [--points 3] [--epochs 10]
        [--pairs self|all]

The space: scikit-learn's digits, `--donors` tiny ResNets (2 epochs each) and a stitching trial for each
donor with itself (`--pairs self`: each trial reads one half, its front's, which is its end's) or for every
ordered pair of them (`all`: a cross pair reads two donors' halves) at each of `--points` stitch points, `dm`
and `tlm` (`--epochs`, 10). Reads each stage's placement line (`sweep.backends.placement`) from the run's
output and prints, per run, the units that ran on a node holding the halves they read, those that computed
them again on the other node, the wall time, and the workers' cache lines. One JSON line per run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.benchmarks.loopback_cluster import Cluster  # noqa: E402

POINTS = ["layer1.0", "layer2.0", "layer3.0", "layer3.1"]
LINE = re.compile(r"^\[(\w+)\] placement \(([^)]*)\): (\d+) of (\d+) units ran .*?, (\d+) computed them again")


def space(n_donors: int, n_points: int, epochs: int = 10, pairs: str = "self") -> dict:
    names = [f"d{i}" for i in range(n_donors)]
    ends = (lambda a: [a]) if pairs == "self" else (lambda a: names)
    return {
        "name": "placement_bench",
        "data": {"dataset": "digits", "train_size": None, "val_size": 200, "test_size": None},
        "donors": {
            n: {"arch": "resnet_tiny", "training": "plain", "epochs": 2, "lr": 0.1, "seed": i}
            for i, n in enumerate(names)
        },
        "stitching": {
            "pairs": [{"front": f"zoo:{a}", "end": f"zoo:{b}"} for a in names for b in ends(a)],
            "stitch_points": POINTS[:n_points],
            "objectives": ["dm", "tlm"],
            "dm_samples": 100,
            "epochs": epochs,
            "lr": 0.01,
        },
        "evaluation": {"n_eval_robust": 0},
    }


def run_once(work: Path, placement: str, spec: dict) -> dict:
    cluster = Cluster(uuid.uuid4().hex[:8], cpus_per_node=1, own_tmp=True)
    path = work / "space.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    storage = work / f"results-{placement}-{int(time.time())}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STITCHSWEEP_CACHE")}  # each node's own
    env.update(STITCHSWEEP_PLACEMENT=placement, RAY_AUTH_MODE="token", PYTHONPATH=str(REPO))
    try:
        cluster.start_head()
        cluster.add_worker("worker1")
        t0 = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-m", "sweep", "run", str(path), "--storage", str(storage), "--address", cluster.address],
            capture_output=True, text=True, env=env, cwd=REPO, timeout=1800,
        )  # fmt: skip
        wall = time.perf_counter() - t0
        folders = {name: any(Path(tmp).glob("stitchsweep-cache-*/*")) for name, tmp in cluster.tmps.items()}
    finally:
        cluster.stop()
    (work / f"run-{placement}.log").write_text(out.stdout + out.stderr)
    if out.returncode:
        raise SystemExit(out.stdout[-4000:] + out.stderr[-4000:])
    stages = {}
    for line in out.stdout.splitlines():
        if m := LINE.match(line):
            stages[m.group(1)] = {
                "how": m.group(2),
                "home": int(m.group(3)),
                "units": int(m.group(4)),
                "again": int(m.group(5)),
            }
    workers = [ln for ln in out.stdout.splitlines() if "worker" in ln and "cache" in ln]
    return {
        "placement": placement,
        "stages": stages,
        "wall_s": round(wall),
        "node_cache_written": folders,
        "workers": workers,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--donors", type=int, default=8)
    ap.add_argument("--points", type=int, default=3)
    ap.add_argument("--pairs", choices=["self", "all"], default="self")
    ap.add_argument("--epochs", type=int, default=10, help="of each tlm trial: long enough that both nodes run")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="placement-"))
    work.mkdir(parents=True, exist_ok=True)
    spec = space(args.donors, args.points, args.epochs, args.pairs)
    for placement in ("off", "on"):
        print(json.dumps(run_once(work, placement, spec)), flush=True)
    print(json.dumps({"load_average": os.getloadavg()}))


if __name__ == "__main__":
    main()
