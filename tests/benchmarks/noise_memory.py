"""A noise sender's training part read the way a fit reads it (one epoch of shuffled batches of 64), drawn per
batch against held whole: peak memory and the time drawing adds, beside the receiver's own work per batch.

    python tests/benchmarks/noise_memory.py [--n 60000] [--rest-batches 3]

Cases (Smith & Marcu 2024 B.2 / C.2 at the paper's 6,000 samples per class): VGG-19's `features.2` on MNIST
(64 x 32 x 32: `vgg19_tv` resizes 28 px to 32) and ResNet-18's `layer1.0` (64 x 28 x 28). Each case runs in a
fresh process; it prints its peak RSS (getrusage: Torch and the class bases included), the bytes the part would
take held, the epoch's drawing time and, for VGG-19, the receiver's rest g > features.2 forward and backward
on the same batches (timed on `--rest-batches` of them), so the drawing's share of a fit is a ratio measured
in one run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

CASES = {"vgg19_features.2": (64, 32, 32), "resnet18_layer1.0": (64, 28, 28)}


def _child(case: str, n: int, rest_batches: int) -> None:
    import resource

    import torch

    from sweep.data.core import batches
    from sweep.stitching.noise import noise_splits

    torch.set_num_threads(2)
    shape = CASES[case]
    splits = noise_splits(shape, 10, 0.1, n // 10, 0, 0, seed=1)
    x, y = splits.train_x, splits.train_y
    gen = torch.Generator().manual_seed(0)
    t0 = time.perf_counter()
    total = 0.0
    for xb, _ in batches(x, y, 64, gen):
        total += float(xb[:, 0, 0, 0].sum())
    draw_s = time.perf_counter() - t0
    row = {"case": case, "samples": n, "shape": list(shape), "held_gb": round(x.numel() * 4 / 1e9, 1)}
    row.update(peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
    row.update(draw_epoch_s=round(draw_s, 1), draw_per_sample_us=round(draw_s / n * 1e6))
    if case.startswith("vgg19") and rest_batches:
        from sweep.models.base import build, split

        net = build("vgg19_tv", 1, 10, (0.5,), (0.25,), image_size=28)
        _, rest = split(net, "before_features.2")
        xb, yb = x[:64], y[:64]
        t1 = time.perf_counter()
        for _ in range(rest_batches):
            torch.nn.functional.cross_entropy(rest(xb), yb).backward()
        rest_s = (time.perf_counter() - t1) / rest_batches * len(range(0, n, 64))
        row.update(rest_epoch_s=round(rest_s, 1), draw_share=round(draw_s / (draw_s + rest_s), 3))
    print(json.dumps(row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=60000, help="training samples (the paper: 6,000 per class)")
    parser.add_argument("--rest-batches", type=int, default=3, help="batches of VGG-19's rest timed (0: none)")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.n, args.rest_batches)
        return
    for case in CASES:
        cmd = [sys.executable, __file__, "--child", case, "--n", str(args.n), "--rest-batches", str(args.rest_batches)]
        print(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip(), flush=True)


if __name__ == "__main__":
    main()
