"""Peak memory of a direct-matching fit as K grows: two random CIFAR-style ResNet-18s stitched at `layer1.0`
(64 x 32 x 32 = 65,536 features per image; the 1x1 stitcher's map has 64 + 1 unknowns per output channel),
activations computed chunk by chunk with no cache (the path of a part too large for the worker's memory).

    python tests/benchmarks/dm_memory.py [--ks 500,2000] [--point layer1.0]

Each K runs in a fresh process on random 32 x 32 images (the images themselves are held: 12 KB each); the
script prints each process's peak RSS (getrusage: Torch, the two networks and the images included), its wall
time, the residual and the condition number. Before the accumulated normal equations, the fit held every
activation of the K images on both sides in float32 and again in float64 (K x 65,536 x 12 bytes per side:
1.6 GB at K = 2,000, 39 GB at K = 50,000).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time


def _child(k: int, point: str) -> None:
    import resource

    import torch

    from sweep.data.core import Splits
    from sweep.models.base import build, split
    from sweep.stitching.objectives import FitContext, direct_match
    from sweep.stitching.stitcher import Stitcher

    torch.set_num_threads(2)
    nets = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        nets.append(build("resnet18", 3, 10, (0.5,) * 3, (0.25,) * 3, image_size=32).eval())
    x = torch.rand(k, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    y = torch.zeros(k, dtype=torch.long)
    empty = x[:0]
    splits = Splits(x, y, empty, y[:0], empty, y[:0], 10, (0.5,), (0.25,), split_id="random")
    front, _ = split(nets[0], point)
    end_front, end = split(nets[1], point)
    with torch.no_grad():
        shape = front(x[:2]).shape
    spec = type("Spec", (), {"dm_samples": k, "stitcher": "affine"})()
    stitcher = Stitcher.for_shapes(shape, shape, "random", "affine")
    ctx = FitContext(front, end, stitcher, splits, spec, torch.device("cpu"), end_front=end_front)
    t0 = time.perf_counter()
    out = direct_match(ctx)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    row = {"k": k, "features_per_image": int(shape[1:].numel()), "peak_rss_mb": round(peak_mb)}
    row.update(wall_s=round(time.perf_counter() - t0, 1), **{key: round(v, 6) for key, v in out.items()})
    print(json.dumps(row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", default="500,2000", help="comma-separated K values, each in its own process")
    parser.add_argument("--point", default="layer1.0")
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.point)
        return
    for k in args.ks.split(","):
        cmd = [sys.executable, __file__, "--child", k, "--point", args.point]
        print(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip(), flush=True)


if __name__ == "__main__":
    main()
