"""Ray's fixed cost in a `stitchsweep run`: starting a local node, the first task, shutting down, for the
node `ray.init()` starts and for the lean node of `sweep/backends/node.py`, each in a fresh process,
interleaved in each round (medians reported).

    PYTHONPATH=. .venv/bin/python tests/benchmarks/ray_start.py --rounds 5

`init` is what the command's driver waits for before Tune starts: for the lean node, from the background start
(`begin_lean`) while Tune is imported to the driver connected (`start_lean`); for `ray.init()`, Tune's import
then `ray.init`. `process` is the whole child process, Python's start included.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CHILD = """
import json, sys, time
t0 = time.perf_counter()
lean = sys.argv[1] == "lean"
if lean:
    from sweep.backends import node
    node.begin_lean(2)
    from ray import tune  # noqa: F401  (what the driver imports while the node starts)
    node.start_lean(2)
else:
    import ray
    from ray import tune  # noqa: F401
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
import ray
t1 = time.perf_counter()
ray.get(ray.remote(lambda: 1).remote())
t2 = time.perf_counter()
node.stop_lean() if lean else ray.shutdown()
t3 = time.perf_counter()
print(json.dumps({"init": t1 - t0, "first_task": t2 - t1, "stop": t3 - t2}))
"""


def one(kind: str) -> dict:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, kind], capture_output=True, text=True, timeout=300)
    process = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{out.stderr[-3000:]}")
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "process": process}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    runs: dict[str, list[dict]] = {"ray.init": [], "lean": []}
    for r in range(args.rounds):
        for kind in runs:
            runs[kind].append(one("lean" if kind == "lean" else "full"))
            print(f"round {r + 1} {kind}: " + ", ".join(f"{k} {v:.2f} s" for k, v in runs[kind][-1].items()))
    print(f"{'node':10}" + "".join(f"{k:>12}" for k in ("init", "first_task", "stop", "process")) + "  (medians, s)")
    for kind, rows in runs.items():
        med = {k: statistics.median(row[k] for row in rows) for k in rows[0]}
        print(f"{kind:10}" + "".join(f"{med[k]:12.2f}" for k in ("init", "first_task", "stop", "process")))


if __name__ == "__main__":
    main()
