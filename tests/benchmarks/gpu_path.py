"""The GPU path in one script, for a short lease of a GPU machine (about ten minutes; the machine is offline
and bare): the GPU tests, a cost profile of the card, DM and TLM trials of the ResNet-18 space of Balogh &
Jelasity 2025 Table 1 (`search_spaces/tlm_vs_dm_cifar10.yaml`) on CIFAR-10-shaped data, fp32 against bf16 +
channels-last, four DM trials sharing the card as four workers (what `gpus_per_trial: 0.25` schedules)
against one after the other, and the cost model's prediction for the whole space from those timings.

Speed does not depend on pixel values or on how well a network is trained, so the data are random images
in CIFAR-10's own file format (torchvision's md5 check switched off for them, in this process only) and the
donors are freshly initialised ResNet-18s written into the zoo. Everything goes to --out (the card's name
first). On a machine without CUDA, `--quick` runs the same steps at toy sizes on the CPU (how the script is
checked where no GPU is lent).

    python tests/benchmarks/gpu_path.py --out $OUT                # on the GPU machine
    .venv/bin/python tests/benchmarks/gpu_path.py --quick --out /tmp/gpu_path   # plumbing check, CPU
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
SPACE = REPO / "search_spaces" / "tlm_vs_dm_cifar10.yaml"


def log(out: Path, line: str) -> None:
    print(line, flush=True)
    with open(out / "gpu_path.txt", "a") as fh:
        fh.write(line + "\n")


def write_cifar(root: Path, train: int, test: int) -> None:
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    per = train // 5
    for name, n in [(f"data_batch_{i}", per) for i in range(1, 6)] + [("test_batch", test)]:
        batch = {"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), "labels": list(rng.integers(0, 10, n))}
        (folder / name).write_bytes(pickle.dumps(batch))
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": [str(i) for i in range(10)]}))


def write_svhn(root: Path, train: int, test: int) -> None:
    """SVHN's cropped digits in their MATLAB files: the space's OOD outliers (the 300K Random Images' stand-in)."""
    import scipy.io

    rng = np.random.default_rng(1)
    for split, n in (("train", train), ("test", test)):
        x = rng.integers(0, 256, (32, 32, 3, n), dtype=np.uint8)
        scipy.io.savemat(root / f"{split}_32x32.mat", {"X": x, "y": rng.integers(1, 11, (n, 1), dtype=np.uint8)})


def trust_files() -> None:
    import torchvision

    torchvision.datasets.CIFAR10._check_integrity = lambda self: True
    torchvision.datasets.cifar.check_integrity = lambda path, md5=None: True
    torchvision.datasets.SVHN._check_integrity = lambda self: True


def random_zoo(sweep, sweep_dir, keys: set[str], data_root: str) -> None:
    """Freshly initialised donors in the zoo, as if trained (timings do not depend on the weights)."""
    import torch

    from sweep.data.core import make_splits
    from sweep.kinds.donor import CHECKPOINT, save_donor
    from sweep.models.base import build

    for donor in sweep.donors.values():
        if donor.donor_key not in keys:
            continue
        d = donor.data
        splits = make_splits(d.dataset, 10, 10, 10, root=data_root, download=False)
        torch.manual_seed(0)
        model = build(donor.arch, splits.in_channels, splits.num_classes, splits.mean, splits.std, splits.image_size)
        save_donor(sweep_dir.zoo(donor.donor_key) / CHECKPOINT, model, donor, splits, splits.mean, splits.std)


def pick(sweep, epochs: int | None):
    """DM and DM-initialised TLM trials of the first intra-network pair at four stitch points (`epochs`:
    fewer TLM epochs than the space's, when device time is short)."""
    first = sweep.trials[0]
    same = [t for t in sweep.trials if (t.front_key, t.end_key) == (first.front_key, first.end_key)]
    points = sorted({t.front_point for t in same}, key=lambda p: [t.front_point for t in same].index(p))
    chosen = [points[i] for i in np.linspace(0, len(points) - 1, 4).round().astype(int)]
    out = []
    for objective in ("dm", "dm+tlm"):
        for point in chosen:
            t = next(t for t in same if t.objective == objective and t.front_point == point and t.end_point == point)
            out.append(dataclasses.replace(t, epochs=epochs) if t.epochs and epochs else t)
    return out


def shared_device(args, specs, sweep_dir: str, data_root: str) -> float:
    """One DM trial per process, four processes at once (as four trials of gpus_per_trial 0.25), each warmed
    up first (imports, the data pool, the device), as Tune's reused workers are."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    with ctx.Pool(4, initializer=_warm, initargs=(data_root, args.device)) as pool:
        pool.map(_sleep, [0.5] * 4)  # every worker has run its initializer
        t0 = time.perf_counter()
        pool.starmap(_one_trial, [(s, sweep_dir, data_root, args.device) for s in specs])
        return time.perf_counter() - t0


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def _warm(data_root: str, device: str) -> None:
    import torch

    from sweep.data.core import load_pool

    trust_files()
    load_pool("cifar10", data_root, False)
    if device.startswith("cuda"):
        torch.zeros(1, device=device)


def _one_trial(spec, root: str, data_root: str, device: str) -> float:
    import torch

    from sweep.kinds.stitch import run_trial
    from sweep.results import SweepDir

    trust_files()
    name = json.loads((Path(root) / "name").read_text())
    row = run_trial(spec, SweepDir(root, name), device=torch.device(device), data_root=data_root, download=False)
    assert row["status"] == "done", row.get("error")
    return row["time_total_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="toy sizes on the CPU: checks the script, measures nothing")
    ap.add_argument("--epochs", type=int, default=None, help="TLM epochs (default: the space's, 30)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # no node-level sharing of activations here: the sequential and the concurrent DM trials below start cold
    os.environ["STITCHSWEEP_CACHE_DIR"] = ""
    import torch

    if args.quick:
        args.device = "cpu"
    card = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "CPU"
    log(out, f"device: {card}; torch {torch.__version__}")
    if args.device.startswith("cuda"):
        tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "tests/test_gpu.py"], cwd=REPO)
        log(out, f"GPU tests: exit {tests.returncode}")
    profile = out / "profile.json"
    subprocess.run(
        [sys.executable, str(REPO / "tests/benchmarks/calibrate.py"), str(SPACE), "--device", args.device,
         "--name", card.replace(" ", "-").lower(), "--hardware", card, "--out", str(profile)],
        check=True,
    )  # fmt: skip

    from sweep import cache
    from sweep.config.space import load_space
    from sweep.kinds.stitch import run_trial
    from sweep.results import SweepDir

    data_root = str(out / "data")
    write_cifar(Path(data_root), 500 if args.quick else 50000, 200 if args.quick else 10000)
    write_svhn(Path(data_root), 300 if args.quick else 10000, 10)
    trust_files()
    sweep = load_space(str(SPACE))
    root = out / "results"
    sweep_dir = SweepDir(str(root), sweep.name)
    sweep_dir.create()
    (root / "name").write_text(json.dumps(sweep.name))
    specs = pick(sweep, 1 if args.quick else args.epochs)
    if args.quick:
        small = dict(train_size=300, val_size=50, test_size=100, ood_train_size=200, ood_samples=50)
        specs = [dataclasses.replace(s, similarity_samples=50, **small) for s in specs]
    random_zoo(sweep, sweep_dir, {s.front_key for s in specs} | {s.end_key for s in specs}, data_root)
    dev = torch.device(args.device)
    for variant in ("fp32", "bf16+channels_last"):
        for spec in specs:
            s = spec if variant == "fp32" else dataclasses.replace(spec, precision="bf16", channels_last=True)
            sweep_dir.trial_part(s.trial_id).unlink(missing_ok=True)
            row = run_trial(s, sweep_dir, device=dev, data_root=data_root, download=False)
            assert row["status"] == "done", row.get("error")
            fit, robust = row.get("time_fit_s") or 0, row.get("time_eval_robust_s") or 0
            line = f"{variant:18} {s.objective:6} @{s.front_point:9} {row['time_total_s']:7.1f} s"
            log(out, f"{line} (fit {fit:.1f} s, robust eval {robust:.1f} s)")
    dm = [s for s in specs if s.objective == "dm"][:4]
    for s in dm:
        sweep_dir.trial_part(s.trial_id).unlink(missing_ok=True)
    cache.worker_cache().clear()  # a cold cache: the trials above filled this process's
    t0 = time.perf_counter()
    for s in dm:
        _one_trial(s, str(root), data_root, args.device)
    one_by_one = time.perf_counter() - t0
    for s in dm:
        sweep_dir.trial_part(s.trial_id).unlink(missing_ok=True)
    together = shared_device(args, dm, str(root), data_root)
    log(out, f"4 DM trials: one after the other {one_by_one:.1f} s, four workers sharing the device {together:.1f} s")
    est = subprocess.run(
        [sys.executable, "-m", "sweep", "plan", str(SPACE), "--estimate", "--costs", str(profile),
         "--storage", str(root)],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    log(out, est.stdout[-3000:] + est.stderr[-2000:])


if __name__ == "__main__":
    main()
