"""Images per forward pass of inference on the CPU: how long a ResNet-18 takes over the same images in passes
of different sizes, and whether the outputs change, for the choice of `sweep.train.evaluate.CPU_BATCH`.

A ResNet-18 and the tests' `resnet_tiny` (`sweep.models`, seeded random weights, eval mode) over `--images`
images of each shape, in passes
of each size, interleaved rounds, medians; then, for each size, the largest difference of the logits from
passes of 250 (the activations' chunk) and how many predictions differ.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/cpu_batch.py --images 1000 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from sweep.models.base import build
from sweep.train.evaluate import CPU_BATCH

CASES = {  # name: (architecture, channels, side)
    "resnet18 fashion_mnist 1x28x28": ("resnet18", 1, 28),
    "resnet18 cifar 3x32x32": ("resnet18", 3, 32),
    "resnet_tiny fashion_mnist 1x28x28": ("resnet_tiny", 1, 28),
}


def forward(model, x: torch.Tensor, batch: int) -> tuple[torch.Tensor, float]:
    t0 = time.perf_counter()
    with torch.no_grad():
        out = torch.cat([model(x[i : i + batch]) for i in range(0, len(x), batch)])
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", default=f"500,250,100,{CPU_BATCH},32")
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    sizes = [int(b) for b in args.batches.split(",")]
    print(f"torch {torch.__version__}, {args.threads} threads, {args.images} images, CPU_BATCH = {CPU_BATCH}")
    for name, (arch, channels, side) in CASES.items():
        torch.manual_seed(0)
        model = build(arch, channels, 10, [0.5] * channels, [0.25] * channels, image_size=side).eval()
        x = torch.rand(args.images, channels, side, side)
        forward(model, x[:64], 64)  # warm-up
        times: dict[int, list[float]] = {b: [] for b in sizes}
        outs: dict[int, torch.Tensor] = {}
        for _ in range(args.rounds):
            for b in sizes:
                outs[b], t = forward(model, x, b)
                times[b].append(t)
        ref, _ = forward(model, x, 250)
        base = statistics.median(times[max(sizes)])
        print(f"\n{name}: batch | median s | vs {max(sizes)} | max |logit - batch-250 logit| | predictions changed")
        for b in sizes:
            med = statistics.median(times[b])
            diff = (outs[b] - ref).abs().max().item()
            changed = int((outs[b].argmax(1) != ref.argmax(1)).sum())
            print(f"  {b:>5} | {med:8.2f} | {med / base:5.2f} | {diff:.1e} | {changed}")


if __name__ == "__main__":
    main()
