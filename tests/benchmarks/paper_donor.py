"""One donor of a shipped space trained at the paper's recipe through the engine (the `donor` kind's unit, as a
sweep runs it: the worker's splits on the device, the zoo's resumable training state, the Parquet row with its
clean and AutoAttack accuracy), with the time of every epoch. It stops at `--budget-s`: after the second epoch
it projects the whole run from the mean epoch so far, and a run that would not end in time stops there (the
zoo keeps its state: the same command resumes it) and says so.

Balogh & Jelasity 2023 Table 1, row h_N4 (ResNet-18 on Fashion-MNIST, 200 epochs, 94.77% test accuracy):

    python tests/benchmarks/paper_donor.py --data-root DATA --out OUT            # on a GPU machine
    .venv/bin/python tests/benchmarks/paper_donor.py --quick --out /tmp/paper_donor   # plumbing check, CPU

DATA holds `FashionMNIST/raw/*.gz` (torchvision's layout; the Debian package `dataset-fashion-mnist` has the
four files). `--quick` trains 2 epochs on 600 images on the CPU: it checks the script and measures nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


class OverBudget(Exception):
    """Raised from the progress callback: the run would not end within the budget."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--space", default=str(REPO / "search_spaces" / "robust_models_table1.yaml"))
    ap.add_argument("--donor", default="h_n4")
    ap.add_argument("--data-root", default="/usr/share/datasets/fashion-mnist-root")
    ap.add_argument("--results", default=None, help="results root (default: OUT/results)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--budget-s", type=float, default=330, help="stop when the projected run ends later than this")
    ap.add_argument("--quick", action="store_true", help="2 epochs on 600 images on the CPU: plumbing only")
    ap.add_argument("--precision", default=None, choices=("fp32", "bf16"), help="the donor's training precision")
    ap.add_argument("--channels-last", action="store_true", help="the donor's training step in channels-last")
    ap.add_argument("--cudnn-benchmark", action="store_true", help="cuDNN picks its fastest convolutions once")
    args = ap.parse_args()
    t_start = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "paper_donor.txt"

    def log(line: str) -> None:
        print(line, flush=True)
        with open(log_path, "a") as fh:
            fh.write(line + "\n")

    import torch

    from sweep.config.space import load_space
    from sweep.kinds.base import RunContext, resolve
    from sweep.registry import KINDS
    from sweep.store.results import SweepDir

    device = torch.device("cpu" if args.quick else args.device)
    sweep = load_space(args.space)
    kind = KINDS.get_entry("donor")
    work = kind.units(sweep)[args.donor]
    if args.quick:
        data = dataclasses.replace(work.donor.data, train_size=600, val_size=100, test_size=200)
        donor = dataclasses.replace(work.donor, epochs=2, data=data)
        evals = tuple(dataclasses.replace(ev, n_eval_robust=20) for ev in work.evaluations)
        work = dataclasses.replace(work, donor=donor, evaluations=evals)
        if args.data_root == ap.get_default("data_root"):
            args.data_root = None  # the quickstart's own data
    numerics = {"precision": args.precision, "channels_last": args.channels_last or None}
    numerics = {k: v for k, v in numerics.items() if v is not None}
    if numerics:  # the space's donor with other numerics: another donor key (the options of a zoo donor)
        work = dataclasses.replace(work, donor=dataclasses.replace(work.donor, **numerics))
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    d = work.donor
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    log(
        f"{card}, torch {torch.__version__}: {sweep.name} donor {d.name} ({d.arch}, {d.training}, {d.epochs} epochs, "
        f"{d.precision or 'fp32'}{', channels-last' if d.channels_last else ''}"
        f"{', cudnn.benchmark' if args.cudnn_benchmark else ''})"
    )
    root = Path(args.results or out / "results")
    sweep_dir = SweepDir(str(root), sweep.name)
    sweep_dir.create()
    epochs: list[tuple[int, float, dict]] = []
    last = [time.perf_counter()]

    def progress(m: dict) -> None:
        now = time.perf_counter()
        if m.get("phase") == "zoo_resumed":
            log(f"resumed after epoch {m['epoch']}")
        if m.get("phase") != "zoo":
            return
        seconds, last[0] = now - last[0], now
        epochs.append((m["epoch"], seconds, m))
        val = f"val_acc {m['val_acc']:.4f}" if "val_acc" in m else ""
        log(f"epoch {m['epoch']:3}/{m['epochs']} {seconds:6.2f} s  train_loss {m['train_loss']:.4f}  {val}")
        if len(epochs) >= 2 and m["epoch"] < m["epochs"]:
            per_epoch = sum(s for _, s, _ in epochs[1:]) / (len(epochs) - 1)  # the first holds the warm-up
            ends_at = now - t_start + per_epoch * (m["epochs"] - m["epoch"])
            if ends_at > args.budget_s:
                raise OverBudget(f"{per_epoch:.2f} s an epoch: {m['epochs']} epochs end at {ends_at:.0f} s")

    ctx = RunContext(sweep_dir, device, data_root=args.data_root, download=False, report=progress)
    t0 = time.perf_counter()
    result = resolve(kind.run)(work, ctx)
    wall = time.perf_counter() - t0
    if result.get("status") != "done":
        log(f"not finished ({wall:.0f} s): {result.get('error')}")
    else:
        timed = [s for _, s, _ in epochs[1:]] or [s for _, s, _ in epochs]
        log(
            f"done in {wall:.0f} s ({len(epochs)} epochs trained here, {sum(s for _, s, _ in epochs):.0f} s; "
            f"{sum(timed) / len(timed):.2f} s an epoch after the first): clean_acc {result['clean_acc']:.4f}, "
            f"robust_acc {result['robust_acc']}"
        )
    summary = {"device": card, "donor": d.name, "donor_key": d.donor_key, "epochs": d.epochs, "result": result}
    summary.update(wall_s=wall, precision=d.precision or "fp32", channels_last=bool(d.channels_last))
    summary["epoch_s"] = [s for _, s, _ in epochs]
    (out / "paper_donor.json").write_text(json.dumps(summary, indent=1, default=str))


if __name__ == "__main__":
    main()
