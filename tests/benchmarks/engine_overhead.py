"""Engine overhead: a sweep of cheap stitching trials through `stitchsweep run` against the same trials in a
bare Python loop (`run_trial` one after the other in one process), both with the donors already in the zoo.

The space (written to the storage folder): two `resnet_tiny` donors on 4,000 Fashion-MNIST images, every
stitch point, `tlm` (2 epochs) and `dm`, AutoAttack on 100 images, `cpus_per_trial: 2`: 12 trials of about
a second of work each. Steps:

  1. `stitchsweep run` once (trains the two donors; untimed);
  2. the trials' parts removed, `stitchsweep run` again, timed: the command's wall time, the stitch stage's
     wall time and the sum of the trials' own `time_total_s`;
  3. the parts removed again, the same trials through `run_trial` in this process, timed (Python's start and
     PyTorch's import excluded), then once more as a whole process of its own (included, as in step 2).

With `--rounds N` steps 2-3 repeat, interleaved, and medians are reported. `--baseline CHECKOUT` also times,
in each round, the `stitchsweep run` of another checkout (a worktree of the commit before a change) on the
same trials and zoo:

    git worktree add /tmp/wt_base BASE_COMMIT
    PYTHONPATH=. .venv/bin/python tests/benchmarks/engine_overhead.py --storage /tmp/bench_overhead \
        --rounds 5 --baseline /tmp/wt_base

Pass `--space FILE` to time another space's stitching stage the same way (e.g. the reduced seed 004 space).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPACE = """\
name: bench_overhead
data: {dataset: fashion_mnist, train_size: 4000, val_size: 500, test_size: 1000}
donors:
  a: &net
    arch: resnet_tiny
    training: plain
    epochs: 2
    seed: 0
    data: {dataset: fashion_mnist, train_size: 4000, val_size: 500}
  b: {<<: *net, seed: 1}
stitching:
  - pairs: [{front: zoo:a, end: zoo:b}]
    stitch_points: all
    objectives: [tlm, dm]
    seeds: SEEDS
    epochs: 2
evaluation: {n_eval_robust: 100}
resources: {cpus_per_trial: 2}
"""


def _remove_trials(sweep_path: Path) -> None:
    for sub in ("trials", "curves"):
        for part in (sweep_path / sub).glob("*.parquet"):
            part.unlink()


def _cli(space: Path, storage: Path, env: dict, checkout: Path | None = None) -> tuple[float, str]:
    """One `stitchsweep run` of this checkout (or of `checkout`), as a whole process: (wall seconds, stdout)."""
    if checkout is not None:
        env = dict(env, PYTHONPATH=str(checkout))
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "sweep", "run", str(space), "--storage", str(storage), "--num-cpus", "2"],
        env=env,
        capture_output=True,
        text=True,
        cwd=checkout or _checkout(),  # `-m sweep` imports the package of the current folder first
    )
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"stitchsweep run failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return wall, out.stdout


def _checkout() -> Path:
    """The folder of the `sweep` package this script imports (this checkout, or PYTHONPATH's)."""
    import sweep

    return Path(sweep.__file__).resolve().parent.parent


def _own_times(sweep_path: Path) -> tuple[int, float, float]:
    """(trials, the sum of their own time_total_s, the span from the first trial's start to the last one's
    end: the stage without the command's fixed start-up and shut-down)."""
    import analysis

    trials = analysis.load_trials(sweep_path)
    assert (trials["status"] == "done").all(), trials[["trial_id", "status", "error"]]
    started = trials["finished_at"] - analysis_seconds(trials["time_total_s"])
    span = (trials["finished_at"].max() - started.min()).total_seconds()
    return len(trials), float(trials["time_total_s"].sum()), span


def analysis_seconds(seconds):
    import pandas as pd

    return pd.to_timedelta(seconds, unit="s")


def _compare(mine: Path, other: Path) -> None:
    """Every column both record, but timings, host, device and time, exactly."""
    import analysis

    def rows(path):
        t = analysis.load_trials(path).set_index("trial_id").sort_index()
        return t[[c for c in t.columns if not c.startswith("time_") and c not in ("hostname", "device", "finished_at")]]

    a, b = rows(mine), rows(other)
    # a newer release may record more columns (an older release's rows read with them null)
    common = [c for c in a.columns if c in b.columns and (b[c].notna().any() or a[c].isna().all())]
    a, b = a[common], b[common]
    same = a.index.equals(b.index) and a.equals(b)
    print(f"  rows equal to {other}'s, every column but timings, host, device and time: {same}", flush=True)
    if not same and a.index.equals(b.index):
        diff = [c for c in a.columns if not a[c].equals(b[c])]
        print(f"  differing columns: {diff}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--storage", default=None, help="results root (default: a new temporary folder)")
    ap.add_argument("--space", default=None, help="a space of your own (default: the 12 cheap trials above)")
    ap.add_argument("--seeds", type=int, default=1, help="stitching seeds of the default space (12 trials each)")
    ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds (medians are reported)")
    ap.add_argument("--no-loop", action="store_true", help="skip the bare loop")
    ap.add_argument("--from", dest="source", default=None, help="start from a copy of this results root (its zoo)")
    ap.add_argument("--compare", default=None, help="check the rows equal those of this results root's sweep")
    ap.add_argument("--baseline", default=None, help="a checkout whose `stitchsweep run` is timed in each round too")
    ap.add_argument("--loop-only", action="store_true", help=argparse.SUPPRESS)  # the bare loop as a process
    args = ap.parse_args()
    if args.loop_only:
        from sweep.config.space import load_space

        _bare_loop(Path(args.storage), load_space(args.space))
        return
    storage = Path(args.storage or tempfile.mkdtemp(prefix="bench_overhead_"))
    storage.mkdir(parents=True, exist_ok=True)
    space = Path(args.space) if args.space else storage / "bench_overhead.yaml"
    if not args.space:
        space.write_text(SPACE.replace("SEEDS", str(list(range(args.seeds)))))
    env = dict(os.environ)

    import sweep
    from sweep.config.space import load_space

    print(f"sweep package: {Path(sweep.__file__).parent}", flush=True)
    loaded = load_space(str(space))
    sweep_path = storage / loaded.name
    if args.source:  # the zoo (and the other kinds' parts) of an earlier run
        shutil.copytree(args.source, storage, dirs_exist_ok=True)
    else:
        wall, _ = _cli(space, storage, env)  # zoo (and trials): untimed
        print(f"first run (zoo + trials): {wall:.1f} s", flush=True)

    walls, loops, processes, bases = [], [], [], []
    for r in range(args.rounds):  # interleaved: the machine's noise falls on every side alike
        _remove_trials(sweep_path)
        wall, _ = _cli(space, storage, env)
        walls.append(wall)
        n, own, span = _own_times(sweep_path)
        print(f"round {r + 1}: stitchsweep run, donors in the zoo: {n} trials, wall {wall:.1f} s,", end=" ")
        print(f"sum of time_total_s {own:.1f} s, first trial start to last trial end {span:.1f} s", end=" ")
        print(f"(fixed start-up and shut-down: {wall - span:.1f} s)", flush=True)
        if args.baseline:  # the same command from another checkout, the same trials (their parts removed)
            _remove_trials(sweep_path)
            bases.append(_cli(space, storage, env, Path(args.baseline).resolve())[0])
            print(f"round {r + 1}: stitchsweep run of {args.baseline}: wall {bases[-1]:.1f} s", flush=True)
        if args.compare and r == 0:
            _compare(sweep_path, Path(args.compare) / loaded.name)
        if args.no_loop:
            continue
        _remove_trials(sweep_path)
        loop, _ = _bare_loop(storage, loaded)
        loops.append(loop)
        # the same loop as a whole process, as the command is timed: Python's start and PyTorch's import included
        _remove_trials(sweep_path)
        t0 = time.perf_counter()
        cmd = [sys.executable, __file__, "--storage", str(storage), "--space", str(space), "--loop-only"]
        subprocess.run(cmd, env=env, check=True, capture_output=True, cwd=_checkout())
        processes.append(time.perf_counter() - t0)
        print(f"round {r + 1}: bare loop: wall {loop:.1f} s; as a process: {processes[-1]:.1f} s", flush=True)
    wall = statistics.median(walls)
    print(f"stitchsweep run: median wall {wall:.1f} s over {len(walls)} round(s)")
    if bases:
        base = statistics.median(bases)
        print(f"stitchsweep run of {args.baseline}: median wall {base:.1f} s; this checkout / it: {wall / base:.2f}")
    if loops:
        loop, process = statistics.median(loops), statistics.median(processes)
        print(f"bare loop in this process: median {loop:.1f} s; stitchsweep run / bare loop: {wall / loop:.2f}x")
        print(f"bare loop as a process: median {process:.1f} s; stitchsweep run / it: {wall / process:.2f}x")


def _bare_loop(storage: Path, loaded) -> tuple[float, int]:
    """The trials through `run_trial`, one after the other in this process: (wall seconds, trials)."""
    import torch

    from sweep.kinds.trial.run import run_trial
    from sweep.store.results import SweepDir

    torch.set_num_threads(2)
    sweep_dir = SweepDir(str(storage), loaded.name)
    t0 = time.perf_counter()
    for spec in loaded.trials:
        row = run_trial(spec, sweep_dir, device=torch.device("cpu"))
        assert row["status"] == "done", row.get("error")
    return time.perf_counter() - t0, len(loaded.trials)


if __name__ == "__main__":
    main()
