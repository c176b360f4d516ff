"""How long checking a space takes: `stitchsweep plan SPACE` as a user runs it, a whole process each time,
against `python -c "import torch"` (the floor while planning imports torch), interleaved over rounds so that
a noisy machine slows both alike. With `--baseline DIR` (a worktree of an earlier commit) its `plan` runs in
the same rounds.

    .venv/bin/python tests/benchmarks/plan_time.py search_spaces/quickstart.yaml --rounds 5 --baseline /tmp/wt_base
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _timed(cmd: list[str], cwd: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(cwd))
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("space")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--baseline", type=Path, help="a checkout of an earlier commit, timed in the same rounds")
    args = p.parse_args()
    space = str(Path(args.space).resolve())
    runs = {"import torch": ([sys.executable, "-c", "import torch"], REPO)}
    runs["plan (this checkout)"] = ([sys.executable, "-m", "sweep", "plan", space], REPO)
    if args.baseline:
        runs["plan (baseline)"] = ([sys.executable, "-m", "sweep", "plan", space], args.baseline.resolve())
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.rounds):
        for name, (cmd, cwd) in runs.items():
            times[name].append(_timed(cmd, cwd))
    for name, ts in times.items():
        print(f"{name:24s} median {statistics.median(ts):5.2f} s  min {min(ts):5.2f} s  ({len(ts)} runs)")


if __name__ == "__main__":
    main()
