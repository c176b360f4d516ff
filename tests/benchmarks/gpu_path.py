"""The GPU path in one script, for a short lease of a GPU machine (under ten minutes; the machine is offline
and bare), in order of value: the GPU tests; Balogh & Jelasity 2023's h_N4 donor at the paper's recipe through
the engine when `--fmnist` names Fashion-MNIST's files (`paper_donor.py`, stopping itself at its budget); a
cost profile of the card for every shipped space's shapes, checked against measured DM and TLM trials
(`cost_check.py`); the peak device memory of every-layer CKA of two
WRN-28-10s at batches of 1,024 (`cka_modules_memory.py`); DM and TLM trials of the ResNet-18 space of Balogh &
Jelasity 2025 Table 1 (`search_spaces/tlm_vs_dm_cifar10.yaml`) on CIFAR-10-shaped data, fp32 against bf16 +
channels-last; and four DM trials sharing the card as four workers (what `gpus_per_trial: 0.25` schedules)
against one after the other. Each step starts only within `--budget-s`, and a skipped one is named. The cost
model's prediction from the profile needs no GPU: `stitchsweep plan SPACE --estimate --costs profile.json`.

Speed does not depend on pixel values or on how well a network is trained, so the data are random images
in CIFAR-10's own file format (torchvision's md5 check switched off for them, in this process only) and the
donors are freshly initialised ResNet-18s written into the zoo. Everything goes to --out (the card's name
first). On a machine without CUDA, `--quick` runs the same steps at toy sizes on the CPU (how the script is
checked where no GPU is lent).

    python tests/benchmarks/gpu_path.py --out $OUT --work /tmp/gp --epochs 2 --fmnist FMNIST_ROOT   # on the GPU
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


def with_repo() -> dict:
    """The environment for a child process: the bare machine runs the repository uninstalled, beside the
    wheels carried to it (already on PYTHONPATH)."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))


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
    from sweep.kinds.donor.run import save_donor
    from sweep.models.base import build

    for donor in sweep.donors.values():
        if donor.donor_key not in keys:
            continue
        d = donor.data
        splits = make_splits(d.dataset, 10, 10, 10, root=data_root, download=False)
        torch.manual_seed(0)
        model = build(donor.arch, splits.in_channels, splits.num_classes, splits.mean, splits.std, splits.image_size)
        save_donor(sweep_dir.checkpoint(donor.donor_key), model, donor, splits, splits.mean, splits.std)


def space_with_zoo(space: Path, results: Path, data_root: str):
    """The space at `space` and its results folder under `results`, with its donors in the zoo: freshly
    initialised where a checkpoint is missing (`random_zoo`)."""
    from sweep.config.space import load_space
    from sweep.store.results import SweepDir

    trust_files()
    sweep = load_space(str(space))
    sweep_dir = SweepDir(str(results), sweep.name)
    sweep_dir.create()
    keys = {d.donor_key for d in sweep.donors.values()}
    if not all(sweep_dir.checkpoint(k).exists() for k in keys):
        random_zoo(sweep, sweep_dir, keys, data_root)
    return sweep, sweep_dir


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


def in_workers(n: int, args, specs, sweep_dir: str, data_root: str) -> float:
    """The DM trials in `n` fresh processes at once (n = 4: four trials of gpus_per_trial 0.25; n = 1: one
    after the other), each warmed up first (imports, the data pool, the device) as Tune's reused workers are,
    so both sides start equally cold, and with the node's cores split between them (Ray gives a trial
    `cpus_per_trial` threads)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    threads = max(1, (os.cpu_count() or 1) // n)  # the node's cores split between the workers, as Ray does
    with ctx.Pool(n, initializer=_warm, initargs=(data_root, args.device, threads)) as pool:
        pool.map(_sleep, [0.5] * n)  # every worker has run its initializer
        t0 = time.perf_counter()
        pool.starmap(_one_trial, [(s, sweep_dir, data_root, args.device) for s in specs])
        return time.perf_counter() - t0


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def _warm(data_root: str, device: str, threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    from sweep.data.core import load_pool

    trust_files()
    load_pool("cifar10", data_root, False)
    if device.startswith("cuda"):
        torch.zeros(1, device=device)


def _one_trial(spec, root: str, data_root: str, device: str) -> float:
    import torch

    from sweep.kinds.trial.run import run_trial
    from sweep.store.results import SweepDir

    trust_files()
    name = json.loads((Path(root) / "name").read_text())
    row = run_trial(spec, SweepDir(root, name), device=torch.device(device), data_root=data_root, download=False)
    assert row["status"] == "done", row.get("error")
    return row["time_total_s"]


TIMES = ("setup", "fit", "eval_clean", "eval_robust", "similarity", "ood")


VARIANTS = ("fp32", "bf16+channels_last")


def run_pair(spec, sweep_dir, dev, data_root: str, out: Path, variants=VARIANTS) -> None:
    """One trial in fp32, then in bf16 + channels-last, each logged with its time per phase (the first of a
    stitch point also trains the point's OOD detector, which the zoo then keeps for every later trial)."""
    from sweep.kinds.trial.run import run_trial

    for variant in variants:
        s = spec if variant == "fp32" else dataclasses.replace(spec, precision="bf16", channels_last=True)
        sweep_dir.trial_part(s.trial_id).unlink(missing_ok=True)
        row = run_trial(s, sweep_dir, device=dev, data_root=data_root, download=False)
        assert row["status"] == "done", row.get("error")
        phases = ", ".join(f"{k} {row.get(f'time_{k}_s') or 0:.1f}" for k in TIMES)
        log(out, f"{variant:18} {s.objective:6} @{s.front_point:9} {row['time_total_s']:7.1f} s ({phases})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="toy sizes on the CPU: checks the script, measures nothing")
    ap.add_argument("--epochs", type=int, default=None, help="TLM epochs (default: the space's, 30)")
    ap.add_argument("--budget-s", type=float, default=480, help="start no step after this many seconds")
    ap.add_argument("--sharing-only", action="store_true", help="only the shared-device comparison")
    ap.add_argument("--work", default=None, help="the data and results (default: --out; large)")
    ap.add_argument("--fmnist", default=None, help="a root holding FashionMNIST/raw/*.gz: train h_N4 (paper_donor.py)")
    ap.add_argument("--donor-budget-s", type=float, default=330, help="the h_N4 step's own budget")
    args = ap.parse_args()
    t_start = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def left(step: str, need: float = 0.0) -> bool:
        elapsed = time.perf_counter() - t_start
        if elapsed + need > args.budget_s:
            log(out, f"skipped (budget of {args.budget_s:.0f} s spent at {elapsed:.0f} s): {step}")
            return False
        return True

    # no node-level sharing of activations here: the sequential and the concurrent DM trials below start cold
    os.environ["STITCHSWEEP_CACHE_DIR"] = ""
    import torch

    if args.quick:
        args.device = "cpu"
    card = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "CPU"
    log(out, f"device: {card}; torch {torch.__version__}")
    if args.device.startswith("cuda") and not args.sharing_only:
        # the Ray test needs ray, which the bare GPU machine lacks (and its wheel is over the carry limit)
        pytest = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-k", "not ray", "tests/project/test_gpu.py"]
        tests = subprocess.run(pytest, cwd=REPO)
        log(out, f"GPU tests: exit {tests.returncode}")
    # the first number at a paper's scale: Balogh & Jelasity 2023 Table 1's h_N4 (ResNet-18, Fashion-MNIST,
    # 200 epochs) trained through the engine; it stops itself when its projected end passes its budget
    if not args.sharing_only and args.fmnist and left("h_N4 at the paper's recipe (paper_donor.py)", 60):
        budget = min(args.donor_budget_s, args.budget_s - (time.perf_counter() - t_start))
        donor = [sys.executable, str(REPO / "tests/benchmarks/paper_donor.py"), "--out", str(out),
                 "--data-root", args.fmnist, "--budget-s", f"{budget:.0f}", "--device", args.device,
                 "--results", str(Path(args.work or out) / "donor_results")]  # fmt: skip
        done = subprocess.run(donor + (["--quick"] if args.quick else []), env=with_repo())
        log(out, f"paper_donor.py: exit {done.returncode} at {time.perf_counter() - t_start:.0f} s")
    name = card.replace(" ", "-").lower()
    calibrate = [sys.executable, str(REPO / "tests/benchmarks/calibrate.py"), "--device", args.device,
                 "--name", name, "--hardware", card, "--out", str(out / "profile.json")]  # fmt: skip
    if not args.sharing_only and left("the cost profile (calibrate.py)", 20):
        subprocess.run(calibrate + ([str(SPACE)] if args.quick else []), check=True)
        log(out, f"profile written at {time.perf_counter() - t_start:.0f} s")

    # the bounded-memory target: every-layer CKA of two WRN-28-10s at batches of 1,024 on 32 px, the
    # device's peak allocation against `plan`'s prediction
    if not args.sharing_only and left("every-layer CKA memory at batches of 1,024"):
        sizes = ["--images", "16", "--batch", "8"] if args.quick else ["--images", "2048", "--batch", "1024"]
        cka = [sys.executable, str(REPO / "tests/benchmarks/cka_modules_memory.py"), "--ways", "hooks", *sizes]
        env = with_repo()
        done = subprocess.run(cka + ["--size", "32", "--device", args.device], capture_output=True, text=True, env=env)
        log(out, f"every-layer CKA: {done.stdout.strip() or done.stderr.strip()[-2000:]}")

    from sweep.config.space import load_space
    from sweep.store.results import SweepDir

    work = Path(args.work or out)
    data_root = str(work / "data")
    write_cifar(Path(data_root), 500 if args.quick else 50000, 200 if args.quick else 10000)
    write_svhn(Path(data_root), 300 if args.quick else 10000, 10)
    trust_files()
    # the cost model against measured trials: the profile just measured prices DM and TLM trials of the space,
    # run one after the other (`cost_check.py`; the target: each within 1.5x)
    profile = out / "profile.json"
    if not args.sharing_only and profile.is_file() and left("the cost model against measured trials", 60):
        check = [sys.executable, str(REPO / "tests/benchmarks/cost_check.py"), "--device", args.device, "--costs",
                 str(profile), "--work", str(work), "--epochs", str(args.epochs or 2)]  # fmt: skip
        done = subprocess.run(
            check + (["--quick"] if args.quick else []), capture_output=True, text=True, env=with_repo()
        )
        failed = done.stderr.strip()[-2000:] if done.returncode else ""
        log(out, f"cost check (exit {done.returncode}):\n{done.stdout.strip()}\n{failed}".rstrip())
    sweep = load_space(str(SPACE))
    root = work / "results"
    sweep_dir = SweepDir(str(root), sweep.name)
    sweep_dir.create()
    (root / "name").write_text(json.dumps(sweep.name))
    specs = pick(sweep, 1 if args.quick else args.epochs)
    if args.quick:
        small = dict(train_size=300, val_size=50, test_size=100, ood_train_size=200, ood_samples=50)
        specs = [dataclasses.replace(s, similarity_samples=50, **small) for s in specs]
    random_zoo(sweep, sweep_dir, {s.front_key for s in specs} | {s.end_key for s in specs}, data_root)
    dev = torch.device(args.device)
    dm = [s for s in specs if s.objective == "dm"][:4]
    tlm = [s for s in specs if s.objective != "dm"]
    dm_s = []
    for spec in dm if args.sharing_only else dm[:2] + tlm[:1] + dm[2:] + tlm[1:]:
        if not left(f"{spec.objective} @{spec.front_point}"):
            break
        t0 = time.perf_counter()
        run_pair(spec, sweep_dir, dev, data_root, out, ("fp32",) if args.sharing_only else VARIANTS)
        if spec.objective == "dm":
            dm_s.append(time.perf_counter() - t0)
    # the comparison runs eight DM trials (their OOD detectors already in the zoo, from the trials above):
    # start it only when they fit in what is left of the budget
    need = 5 * sum(dm_s) / max(len(dm_s), 1)
    if not left("4 DM trials, one after the other against four workers sharing the device", need):
        return
    times = {}
    for n in (1, 4):
        for s in dm:
            sweep_dir.trial_part(s.trial_id).unlink(missing_ok=True)
        times[n] = in_workers(n, args, dm, str(root), data_root)
    one_by_one, together = times[1], times[4]
    log(out, f"4 DM trials: one after the other {one_by_one:.1f} s, four workers sharing the device {together:.1f} s")
    log(out, f"done in {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
