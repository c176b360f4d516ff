"""The donor training step on its own, timed per variant: where a donor epoch's time goes on a GPU.

The step is the engine's own (`sweep.train`): a ResNet-18 of Balogh & Jelasity 2023 A.2 on Fashion-MNIST-shaped
batches of 128 (1 x 28 x 28, random pixels: speed does not depend on them), SGD with Nesterov momentum, crop and
flip augmentation of the batch on the device, the loss summed on the device. Variants, each timed over
`--steps` steps after warm-up steps (CUDA events around the whole run, one wait at its end):

- `data only`: shuffling and augmenting, no network (what the input pipeline costs);
- `fp32`: the step launched from Python; `no augment`: the same without crop and flip;
- `CUDA graph`: the engine's step on a GPU (`sweep.train.loops.GraphedStep`), fp32, channels-last, bf16;
- `+ cudnn.benchmark`: cuDNN picks its fastest convolution for each shape once;
- `+ channels_last`, `bf16 + channels_last`: memory format, and autocast to bfloat16;
- `compiled bf16 + channels_last`: `torch.compile` of the network (its compile time logged apart).

    python tests/benchmarks/donor_step.py --out OUT            # on a GPU machine
    .venv/bin/python tests/benchmarks/donor_step.py --quick --out /tmp/donor_step   # plumbing check, CPU
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

VARIANTS = (
    ("data only", {}),
    ("fp32", {}),
    ("fp32, CUDA graph", {"graph": True}),
    ("fp32 + channels_last, CUDA graph", {"graph": True, "channels_last": True}),
    ("bf16 + channels_last, CUDA graph", {"graph": True, "channels_last": True, "bf16": True}),
    ("fp32, no augment", {"augment": False}),
    ("fp32 + cudnn.benchmark", {"benchmark": True}),
    ("fp32 + cudnn.benchmark + channels_last", {"benchmark": True, "channels_last": True}),
    ("bf16 + cudnn.benchmark + channels_last", {"benchmark": True, "channels_last": True, "bf16": True}),
    ("compiled bf16 + cudnn.benchmark + channels_last", {"benchmark": True, "channels_last": True, "bf16": True,
                                                          "compile": True}),
)  # fmt: skip


def time_variant(name: str, opts: dict, x, y, device, steps: int, warm: int) -> tuple[float, float]:
    """(ms a step, seconds spent before timing: compilation and warm-up)."""
    import torch

    from sweep.data.augment import augment
    from sweep.data.core import batches
    from sweep.models.base import build
    from sweep.train.loops import EpochLoss, GraphedStep, autocast, optimiser_step, to_device
    from sweep.train.optimizers import make_optimizer

    torch.backends.cudnn.benchmark = bool(opts.get("benchmark"))
    torch.manual_seed(0)
    model = build("resnet18", 1, 10, (0.5,), (0.25,), image_size=28).to(device)
    if opts.get("channels_last"):
        model = model.to(memory_format=torch.channels_last)
    net = torch.compile(model) if opts.get("compile") else model
    opt = make_optimizer("sgd_nesterov", model.parameters(), 0.1, 0.9, 1e-4)
    gen = torch.Generator().manual_seed(0)
    precision = "bf16" if opts.get("bf16") else "fp32"
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()

    def batch_loss(xb, yb):
        with autocast(device, precision, cache=not opts.get("graph")):
            return loss_fn(net(xb), yb)

    step = GraphedStep(batch_loss, opt, device) if opts.get("graph") else None

    def run(n: int) -> None:
        losses = EpochLoss(name)
        done = 0
        while done < n:
            for xb, yb in batches(x, y, 128, gen):
                if opts.get("augment", True):
                    xb = augment(xb, ("crop", "flip"), gen)
                xb = to_device(xb, device, bool(opts.get("channels_last")))
                if step is not None:
                    losses.add(step(xb, yb), len(yb))
                elif name != "data only":
                    losses.add(optimiser_step(opt, batch_loss(xb, yb)), len(yb))
                done += 1
                if done == n:
                    break
        if losses.n:
            losses.mean()  # the one wait, as at an epoch's end

    t0 = time.perf_counter()
    run(warm)
    setup = time.perf_counter() - t0
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    run(steps)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return 1000 * (time.perf_counter() - t0) / steps, setup


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--budget-s", type=float, default=150, help="start no variant after this many seconds")
    ap.add_argument("--quick", action="store_true", help="a few steps on the CPU, no compiled variant")
    args = ap.parse_args()
    import torch

    t_start = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cpu" if args.quick else args.device)
    steps, warm = (3, 1) if args.quick else (args.steps, 20)
    n = 60000 if not args.quick else 512
    x = torch.rand(n, 1, 28, 28, generator=torch.Generator().manual_seed(1)).to(device)
    y = torch.randint(0, 10, (n,), generator=torch.Generator().manual_seed(2)).to(device)
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    lines = [f"{card}, torch {torch.__version__}: ResNet-18 donor step, batches of 128 at 1 x 28 x 28"]
    print(lines[0], flush=True)
    timings = {}
    for name, opts in VARIANTS:
        if args.quick and opts.get("compile"):
            continue
        if time.perf_counter() - t_start > args.budget_s:
            lines.append(f"skipped (budget spent): {name}")
            break
        ms, setup = time_variant(name, opts, x, y, device, steps, warm)
        epoch = ms * 469 / 1000  # 60,000 images in batches of 128
        timings[name] = ms
        lines.append(f"{name:48} {ms:7.2f} ms a step ({epoch:6.2f} s an epoch of 469 steps; warm-up {setup:.1f} s)")
        print(lines[-1], flush=True)
    (out / "donor_step.txt").write_text("\n".join(lines) + "\n")
    (out / "donor_step.json").write_text(json.dumps({"device": card, "ms_a_step": timings}, indent=1))


if __name__ == "__main__":
    main()
