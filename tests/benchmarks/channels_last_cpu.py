"""Convolutions on the CPU in channels-last memory format against the default (contiguous): speed and how far
the results move, for the decision whether `channels_last` should be the CPU default (it is not: rows must
not change between releases).

A ResNet-18 (`sweep.models`, Fashion-MNIST's shape, seeded random weights, eval mode) over the same images in
batches of 250, interleaved rounds; then one training step's gradients on one batch. Reports median times, the
largest absolute difference of the logits and of the gradients, and how many predictions differ.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/channels_last_cpu.py --images 1000 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def forward(model, x: torch.Tensor, channels_last: bool) -> tuple[torch.Tensor, float]:
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    t0 = time.perf_counter()
    with torch.no_grad():
        out = torch.cat([model(x[i : i + 250].contiguous(memory_format=fmt)) for i in range(0, len(x), 250)])
    return out, time.perf_counter() - t0


def gradients(model, x: torch.Tensor, y: torch.Tensor, channels_last: bool) -> torch.Tensor:
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt).train()
    model.zero_grad()
    torch.nn.functional.cross_entropy(model(x.contiguous(memory_format=fmt)), y).backward()
    grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    model.eval()
    return grads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from sweep.models.base import build

    torch.manual_seed(0)
    model = build("resnet18", 1, 10, (0.286,), (0.353,), image_size=28).eval()
    x = torch.rand(args.images, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, 10, (250,), generator=torch.Generator().manual_seed(2))
    times: dict[bool, list[float]] = {False: [], True: []}
    outs: dict[bool, torch.Tensor] = {}
    for r in range(args.rounds):
        for cl in (False, True):
            outs[cl], t = forward(model, x, cl)
            times[cl].append(t)
        print(f"round {r + 1}: contiguous {times[False][-1]:.2f} s, channels_last {times[True][-1]:.2f} s", flush=True)
    plain, last = statistics.median(times[False]), statistics.median(times[True])
    print(f"forward over {args.images} images: contiguous median {plain:.2f} s, channels_last {last:.2f} s")
    print(f"  channels_last / contiguous: {last / plain:.2f}")
    diff = (outs[True] - outs[False]).abs().max().item()
    flips = int((outs[True].argmax(1) != outs[False].argmax(1)).sum())
    print(f"  logits: max |difference| {diff:.3g} (largest |logit| {outs[False].abs().max().item():.3g});")
    print(f"  predictions that differ: {flips} of {args.images}")
    g0, g1 = gradients(model, x[:250], y, False), gradients(model, x[:250], y, True)
    print(f"one training step on 250 images: gradients' max |difference| {(g1 - g0).abs().max().item():.3g}")
    print(f"  (largest |gradient| {g0.abs().max().item():.3g})")


if __name__ == "__main__":
    main()
