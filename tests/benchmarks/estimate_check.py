"""`plan --estimate` against the measured wall time of `stitchsweep run` on three small study shapes, each in fresh
storage: the README's study (same-layer TLM + DM with per-point CKA and a CKA unit), a cross-layer sweep
(TLM from 3 front points to every end point) and a similarity-only study (donors and a CKA matrix, no stitching).
Prints, per study, the predicted and measured wall time, their ratio and the load average.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/estimate_check.py [--only NAME] [--measured FILE] [--costs FILE]

`--measured FILE` keeps the measured times in FILE (JSON) and reuses those already there, so the predictions can
be recomputed after a change to the cost model without running the studies again. `--costs` prices with another
profile (on a busy machine: one measured in the same sitting, `calibrate.py SPACE --out FILE`).
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
DATA = "data: {dataset: fashion_mnist, train_size: 6000, val_size: 1000, test_size: 1000}\n"
DONORS = """donors:
  net:
    vary: {seed: [0, 1]}
    name: "net_s{seed}"
    donor: {arch: resnet_tiny, epochs: 2, lr: 0.1, seed: "{seed}"}
"""
STUDIES = {
    "same_layer": None,  # the README's study, search_spaces/a_first_study.yaml, as shipped
    "cross_layer": "name: cross_layer\n"
    + DATA
    + DONORS
    + """stitching:
  pairs: [{front: zoo:net_s0, end: zoo:net_s1}]
  stitch_points: [layer1.0, layer2.0, layer3.0]
  end_points: all
  objectives: [tlm]
  epochs: 1
evaluation: {n_eval_robust: 0}
""",
    "similarity_only": "name: similarity_only\n"
    + DATA
    + DONORS
    + """similarity:
  - pairs: [{a: zoo:net_s0, b: zoo:net_s1}, {a: zoo:net_s0, b: zoo:net_s0}]
    points: stitch
evaluation: {n_eval_robust: 0}
""",
}


def cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "sweep", *args], env=env, capture_output=True, text=True, cwd=REPO)


def predicted(space: str, costs: str | None = None) -> float:
    """The wall time `plan --estimate` predicts (`sweep.plan.wall`) with the workers `run` would use here, in
    seconds (unrounded: `plan` prints minutes from two minutes on)."""
    sys.path.insert(0, str(REPO))
    from sweep.config.space import load_space
    from sweep.plan.estimate import estimate, load_profile
    from sweep.plan.wall import default_workers, wall_time
    from sweep.registry import KINDS

    sweep, profile = load_space(space), load_profile(costs)
    plan = {k: list(u) for k, u in ((k, KINDS[k].units(sweep)) for k in KINDS) if u}
    est = estimate(sweep, plan, profile)
    return wall_time(est.seconds, est.units, profile, sweep, default_workers(sweep), est.uncalibrated).total


def measured(space: str) -> float:
    """Seconds of `stitchsweep run` in fresh storage."""
    with tempfile.TemporaryDirectory() as storage:
        t0 = time.perf_counter()
        out = cli("run", space, "--storage", storage)
        wall = time.perf_counter() - t0
    if out.returncode:
        raise SystemExit(f"run {space} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=list(STUDIES), action="append")
    ap.add_argument("--costs", help="a profile to price with (default: the shipped cpu-2core)")
    ap.add_argument("--measured", type=Path, help="a JSON file of measured times: kept, and reused where present")
    args = ap.parse_args()
    kept = json.loads(args.measured.read_text()) if args.measured and args.measured.is_file() else {}
    print(f"{'study':<16} {'predicted':>10} {'measured':>10} {'ratio':>6}  load average (1, 5, 15 min)")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only or list(STUDIES):
            text = STUDIES[name]
            space = str(REPO / "search_spaces" / "a_first_study.yaml")
            if text is not None:
                space = str(Path(tmp) / f"{name}.yaml")
                Path(space).write_text(text)
            if name not in kept:
                kept[name] = {"wall_s": measured(space), "load": os.getloadavg()}
                if args.measured:
                    args.measured.write_text(json.dumps(kept, indent=1))
            wall, load = kept[name]["wall_s"], kept[name]["load"]
            guess = predicted(space, args.costs)
            loads = ", ".join(f"{x:.1f}" for x in load)
            print(f"{name:<16} {guess:>9.0f}s {wall:>9.0f}s {wall / guess:>6.2f}  {loads}", flush=True)


if __name__ == "__main__":
    main()
