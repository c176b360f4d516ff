"""Peak memory of a gradient step in a batch, above what the process held before it, against the activations the
network computes there: the factor `sweep.costs.memory.FIT` models (`sweep.costs.working`).

    .venv/bin/python tests/benchmarks/fit_memory.py [--batch 128] [--cases resnet18:layer2.0 resnet18: ...]

A case `ARCH:POINT` is a stitcher's fit: a 1x1 convolution on random activations of `POINT`'s shape, through the
frozen rest of `ARCH` after it (eval mode, parameters without gradients), cross-entropy, an SGD step, as a
stitching trial's gradient fit does; `ARCH:` (no point) trains the whole network from images (train mode, SGD with
momentum), as the zoo stage trains a donor. Each case runs in a fresh process (seeded; CIFAR-10's image shape, 10
classes), three steps, and prints one JSON line: the peak above the process's RSS before the first step in MiB,
the float32 activations of a batch at the stitch points the gradient flows through (`sweep.costs.working.flowing`)
in MiB, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from similarity_worker_memory import _mb, in_fresh_process  # noqa: E402


def _child(case: str, batch: int) -> None:
    import torch

    from sweep.config.shapes import activation_shape
    from sweep.costs.working import flowing
    from sweep.models.base import build, split

    torch.set_num_threads(2)
    torch.manual_seed(0)
    arch, _, point = case.partition(":")
    net = build(arch, 3, 10, (0.5, 0.5, 0.5), (0.25, 0.25, 0.25), 32)
    y = torch.randint(0, 10, (batch,))
    if point:
        net.eval().requires_grad_(False)
        _, end = split(net, point)
        shape = activation_shape(arch, "cifar10", point)
        stitcher = torch.nn.Conv2d(shape[0], shape[0], 1) if len(shape) == 3 else torch.nn.Linear(shape[0], shape[0])
        x = torch.randn(batch, *shape)
        params, model = list(stitcher.parameters()), torch.nn.Sequential(stitcher, end)
        opt = torch.optim.SGD(params, lr=0.01)
    else:
        model, x = net.train(), torch.rand(batch, 3, 32, 32)
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    start = _mb("VmRSS")
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    above = _mb("VmHWM") - start
    acts = flowing(arch, "cifar10", point or None, batch) / 2**20
    print(json.dumps({"case": case, "batch": batch, "peak_above_mb": round(above), "activations_mb": round(acts, 1),
                      "ratio": round(above / acts, 2)}))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument(
        "--cases",
        nargs="+",
        default=[
            "resnet18:layer1.0",
            "resnet18:layer2.0",
            "resnet18:layer3.0",
            "resnet18:",
            "vgg11:conv2",
            "vgg11:",
            "wrn28_10:layer2.0",
        ],  # fmt: skip
    )
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.batch)
        return
    for case in args.cases:
        print(in_fresh_process(__file__, "--child", case, "--batch", str(args.batch)), flush=True)


if __name__ == "__main__":
    main()
