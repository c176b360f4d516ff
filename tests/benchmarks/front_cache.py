"""The activation cache, per stitch point: a TLM trial with the front's activations cached against the same
trial recomputing them on every batch; and the worker's peak memory with the cache on.

A ResNet-18 donor (28 px Fashion-MNIST, 4,000 training images, one epoch: speed does not depend on how well it
is trained) stitched into itself at every point by `tlm` for 3 epochs, in this process (`run_trial`, no Ray),
three ways: cache off; cache on, first trial at the point (it fills the cache: one pass of the front over
train, val and test); cache on, a later trial at the point (every activation a hit). Rows are checked
equal across the three (every column but timings, host, device and time).

    .venv/bin/python tests/benchmarks/front_cache.py [--epochs 3] [--train 4000] [--arch resnet18]

`--memory`: instead, the trials of the reduced seed 004 space's stitching stage one after the other in one
process with a memory budget (`--budget-mb`, default 256), reporting the peak RSS against the RSS before
the first trial (data and imports); `--off` the same with the cache off, the reference: the cache should
add at most its budget.
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

VOLATILE = {"hostname", "device", "finished_at"}


def _space(arch: str, train: int, epochs: int) -> dict:
    data = {"dataset": "fashion_mnist", "train_size": train, "val_size": 500, "test_size": 1000}
    return {
        "name": "front_cache",
        "data": data,
        "donors": {"net": {"arch": arch, "training": "plain", "epochs": 1, "lr": 0.05, "seed": 0, "data": data}},
        "stitching": {
            "pairs": [{"front": "zoo:net", "end": "zoo:net"}],
            "stitch_points": "all",
            "objectives": ["tlm"],
            "epochs": epochs,
            "lr": 0.01,
        },
        "evaluation": {"n_eval_robust": 0},
    }


def _row(spec, sweep_dir):
    import torch

    from sweep.kinds.trial.run import run_trial

    sweep_dir.trial_part(spec.trial_id).unlink(missing_ok=True)
    row = run_trial(spec, sweep_dir, device=torch.device("cpu"))
    assert row["status"] == "done", row.get("error")
    return row


def per_point(args) -> None:
    import torch

    from sweep.config.space import parse_space
    from sweep.kinds.donor.run import run_donor
    from sweep.store.results import SweepDir
    from sweep.worker import cache

    torch.set_num_threads(args.threads)
    sweep = parse_space(_space(args.arch, args.train, args.epochs))
    root = tempfile.mkdtemp(prefix="front_cache_")
    sweep_dir = SweepDir(root, sweep.name)
    sweep_dir.create()
    t0 = time.perf_counter()
    row = run_donor(sweep.donors["net"], sweep.donor_evals["net"], sweep_dir, torch.device("cpu"))
    assert row["status"] == "done", row.get("error")
    print(f"donor {args.arch}: {time.perf_counter() - t0:.0f} s, clean_acc {row['clean_acc']:.3f}", flush=True)
    print(f"{'point':10} {'off s':>7} {'fill s':>7} {'hit s':>7} {'fill x':>7} {'hit x':>7}  (time_fit_s + evaluation)")
    for spec in sweep.trials:
        spec = dataclasses.replace(spec, n_eval_robust=0)
        times, rows = [], []
        for mode in ("off", "fill", "hit"):
            if mode != "hit":
                cache.configure({cache.SWITCH_ENV: "on" if mode == "fill" else "off", cache.DIR_ENV: ""})
            r = _row(spec, sweep_dir)
            times.append(r["time_total_s"] - r.get("time_setup_s", 0.0))
            rows.append({k: v for k, v in r.items() if not k.startswith("time_") and k not in VOLATILE})
        assert rows[0] == rows[1] == rows[2], "cached and uncached rows differ"
        off, fill, hit = times
        print(f"{spec.front_point:10} {off:7.2f} {fill:7.2f} {hit:7.2f} {off / fill:7.2f} {off / hit:7.2f}", flush=True)
        cache.configure({cache.SWITCH_ENV: "off"})  # free the point's entries before the next one


def memory(args) -> None:
    import torch

    from sweep.config.space import load_space
    from sweep.kinds.donor.run import run_donor
    from sweep.kinds.trial.run import run_trial
    from sweep.store.results import SweepDir
    from sweep.worker import cache

    torch.set_num_threads(args.threads)
    sweep = load_space(str(REPO / "search_spaces" / "tlm_vs_dm_fmnist.yaml"))
    root = args.storage or tempfile.mkdtemp(prefix="front_cache_mem_")
    sweep_dir = SweepDir(root, sweep.name)
    sweep_dir.create()
    for name, donor in sweep.donors.items():
        run_donor(donor, sweep.donor_evals[name], sweep_dir, torch.device("cpu"))
    switch = "off" if args.off else "on"
    c = cache.configure({cache.SWITCH_ENV: switch, cache.BUDGET_ENV: str(args.budget_mb), cache.DIR_ENV: ""})
    trials = sorted(sweep.trials, key=lambda s: (s.front_key, s.front_point, s.end_key, s.end_point))[: args.trials]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    for spec in trials:
        sweep_dir.trial_part(spec.trial_id).unlink(missing_ok=True)
        run_trial(spec, sweep_dir, device=torch.device("cpu"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{len(trials)} trials in {time.perf_counter() - t0:.0f} s, cache {switch}, budget {args.budget_mb} MB")
    print(f"peak RSS before the first trial {before:.0f} MB, after the last {peak:.0f} MB (+{peak - before:.0f} MB)")
    print(f"cache: {c.bytes / 2**20:.0f} MB held, {c.stats}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="resnet18")
    ap.add_argument("--train", type=int, default=4000)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--memory", action="store_true", help="the peak-memory measurement instead")
    ap.add_argument("--budget-mb", type=int, default=256)
    ap.add_argument("--off", action="store_true", help="--memory: with the cache off (the reference)")
    ap.add_argument("--trials", type=int, default=60, help="--memory: how many of the space's trials")
    ap.add_argument("--storage", default=None, help="--memory: a results root holding the space's zoo")
    args = ap.parse_args()
    memory(args) if args.memory else per_point(args)


if __name__ == "__main__":
    main()
