"""The cost model against measured trials: a sample of a space's stitching trials run one after the other in
this process (as one worker runs them: its activation cache filled by the first trial at a front, each OOD
detector trained by the first trial at its end point and kept in the zoo), each trial's phases as recorded
(`time_*_s`) next to what `sweep.kinds.trial.cost.trial_phases` predicts for it from a cost profile, in the same order.
The target: every trial's total within 1.5x either way.

Speed does not depend on pixel values or on training, so, as `gpu_path.py`, the data are random images in
CIFAR-10's and SVHN's own file formats and the donors freshly initialised. On a CPU the sizes are cut down
(`--small`: the space's protocol on fewer images and epochs; the model prices whatever sizes the trials have).

    PYTHONPATH=. .venv/bin/python tests/benchmarks/cost_check.py --small --work /tmp/cost_check   # 2-core CPU
    python tests/benchmarks/cost_check.py --device cuda --costs profile.json --work /tmp/cc       # a GPU
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))

from gpu_path import SPACE, pick, random_zoo, trust_files, write_cifar, write_svhn  # noqa: E402

SMALL = {"data": dict(train_size=2000, val_size=200, test_size=1000), "similarity_samples": 500,
         "ood": dict(train_size=1000, samples=500), "epochs": 2}  # fmt: skip
QUICK = {"data": dict(train_size=300, val_size=50, test_size=100), "similarity_samples": 50,
         "ood": dict(train_size=200, samples=50), "epochs": 1}  # fmt: skip
SHOWN = ("setup", "similarity", "fit", "eval_clean", "ood")


def reduced(space: dict, sizes: dict) -> dict:
    """The space on `sizes` (`SMALL`, `QUICK`; its donors' evaluations follow the data's test size)."""
    space["data"].update(sizes["data"])
    for block in space["stitching"] if isinstance(space["stitching"], list) else [space["stitching"]]:
        block.update(similarity_samples=sizes["similarity_samples"], epochs=sizes["epochs"])
        block["ood"].update(sizes["ood"])
    return space


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--space", default=str(SPACE))
    ap.add_argument("--costs", default=None, help="a cost profile (default: the 2-core CPU one; on a GPU, its own)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--work", required=True, help="the random data, zoo and results (made here)")
    ap.add_argument("--small", action="store_true", help=f"fewer images and epochs: {SMALL}")
    ap.add_argument("--quick", action="store_true", help=f"toy sizes, to check the script: {QUICK}")
    ap.add_argument("--epochs", type=int, default=None, help="TLM epochs (default: the space's)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    os.environ["STITCHSWEEP_CACHE_DIR"] = ""  # the worker's memory cache only: nothing from an earlier run
    import torch
    import yaml

    from sweep.config.space import parse_space
    from sweep.costs.pricer import Pricer
    from sweep.kinds.donor.run import run_donor
    from sweep.kinds.trial.cost import trial_phases
    from sweep.kinds.trial.run import run_trial
    from sweep.planning.estimate import load_profile
    from sweep.registry import KINDS
    from sweep.store.results import SweepDir

    torch.set_num_threads(args.threads)
    work = Path(args.work)
    data_root = str(work / "data")
    if not (work / "data" / "cifar-10-batches-py").is_dir():
        write_cifar(Path(data_root), 50000, 10000)
        write_svhn(Path(data_root), 10000, 10)
    trust_files()
    space = yaml.safe_load(Path(args.space).read_text())
    sizes = QUICK if args.quick else SMALL if args.small else None
    sweep = parse_space(reduced(space, sizes) if sizes else space)
    root = work / f"results-{time.strftime('%H%M%S')}"
    sweep_dir = SweepDir(str(root), sweep.name)
    sweep_dir.create()
    specs = pick(sweep, args.epochs)
    specs = [s for s in specs if s.objective == "dm"] + [s for s in specs if s.objective != "dm"]
    keys = {s.front_key for s in specs} | {s.end_key for s in specs}
    random_zoo(sweep, sweep_dir, keys, data_root)
    dev = torch.device(args.device)
    for unit in KINDS["donor"].units(sweep).values():  # the donor stage: rows and kept test predictions
        if unit.donor.donor_key in keys:
            run_donor(
                unit.donor, unit.evaluations, sweep_dir, dev, data_root=data_root, download=False, predictions=True
            )
    profile = load_profile(args.costs)
    missing: set[str] = set()
    pricer = Pricer(profile, missing)
    arch_of = {d.donor_key: d.arch for d in sweep.donors.values() if d.noise_sigma is None}
    fills, detectors = {}, set()
    print(f"profile {profile['name']} ({profile['hardware']}); device {args.device}; torch {torch.__version__}")
    print("trial                   measured s  predicted s  ratio   phases measured / predicted")
    ratios, rows = [], []
    for spec in specs:
        predicted = trial_phases(spec, pricer, arch_of, fills, detectors)
        row = run_trial(spec, sweep_dir, device=dev, data_root=data_root, download=False)
        assert row["status"] == "done", row.get("error")
        measured, guess = row["time_total_s"], sum(predicted.values())
        ratios.append(measured / guess)
        phases = "  ".join(f"{k} {row.get(f'time_{k}_s') or 0:.2f}/{predicted[k]:.2f}" for k in SHOWN)
        print(
            f"{spec.objective:6} @{spec.front_point:9}  {measured:10.2f}  {guess:11.2f}  {ratios[-1]:5.2f}   {phases}"
        )
        rows.append(dict(trial=spec.label, measured_s=measured, predicted_s=guess, phases=predicted, row_times={
            k: row.get(f"time_{k}_s") for k in SHOWN}))  # fmt: skip
    within = sum(1 / 1.5 <= r <= 1.5 for r in ratios)
    total_m, total_p = sum(r["measured_s"] for r in rows), sum(r["predicted_s"] for r in rows)
    print(f"within 1.5x either way: {within} of {len(ratios)} trials; all: measured {total_m:.1f} s, predicted "
          f"{total_p:.1f} s ({total_m / total_p:.2f})")  # fmt: skip
    if missing:
        print(f"not priced: {', '.join(sorted(missing))}")
    (work / "cost_check.json").write_text(json.dumps(rows, indent=1, default=float))


if __name__ == "__main__":
    main()
