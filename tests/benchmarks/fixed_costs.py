"""The fixed costs of `stitchsweep run` that no unit's work accounts for, for a cost profile
(`tests/benchmarks/calibrate.py --fixed` writes them into it):

- `startup_s`: the command's own start and end: Python, the driver's imports, Ray's lean node started (with Tune
  imported behind it), joined, and stopped;
- `stage_s`: one stage's fixed cost: a Tune experiment of one trial whose worker imports PyTorch and the engine's
  kinds and loads a dataset (Fashion-MNIST, the small studies' data; its pool, not a split), from the experiment's
  start to its end.

Each round is a fresh child process (`--child`), timed whole by the parent; `startup_s` is its wall time minus
the stage. The best of `--rounds` (as the profile's other timings: the least a busy machine added).

    PYTHONPATH=. .venv/bin/python tests/benchmarks/fixed_costs.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _worker(config: dict) -> None:
    """What a stage's worker does before its first unit: PyTorch, the kinds, the data."""
    import torch  # noqa: F401
    from ray import tune

    import sweep.kinds.trial.run  # noqa: F401
    from sweep.data.core import load_pool

    load_pool("fashion_mnist", None, download=False)
    tune.report({"done": 1})


def child(num_cpus: int) -> None:
    """One command's worth of fixed costs; prints the stage's seconds as JSON."""
    import sweep.cli  # noqa: F401  the driver's imports
    from sweep.backends.node import begin_lean

    begin_lean(num_cpus)
    from ray import tune

    from sweep.backends import ray as backend

    backend.start_ray(None, num_cpus)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        tune.Tuner(
            tune.with_resources(_worker, {"cpu": 1}),
            param_space={"unit": tune.grid_search(["a"])},
            tune_config=tune.TuneConfig(reuse_actors=True),
            run_config=tune.RunConfig(storage_path=tmp, verbose=0),
        ).fit()
        stage = time.perf_counter() - t0
    from sweep.backends.node import stop_lean

    stop_lean()
    print(json.dumps({"stage_s": stage}))


def measure(rounds: int = 3, num_cpus: int = 2) -> dict:
    """The least `startup_s` and `stage_s` over `rounds` fresh processes."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    startup, stage = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = subprocess.run(
            [sys.executable, __file__, "--child", "--num-cpus", str(num_cpus)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        wall = time.perf_counter() - t0
        s = json.loads(out.stdout.strip().splitlines()[-1])["stage_s"]
        startup.append(wall - s)
        stage.append(s)
    return {"startup_s": round(min(startup), 2), "stage_s": round(min(stage), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--num-cpus", type=int, default=2)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.num_cpus)
        return
    print(json.dumps(measure(args.rounds, args.num_cpus)))


if __name__ == "__main__":
    main()
