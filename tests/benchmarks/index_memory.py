"""Peak memory of each similarity index against what its memory model predicts for it (`Index.memory`, in its
module of `sweep.measures.indices`: the numbers `plan` prints and `resources.memory_per_trial` checks), on random
float32 activations shaped like a CIFAR ResNet-18's.

    python tests/benchmarks/index_memory.py [--only opd-flatten,pwcca-positions]

Each case runs in a fresh process: it builds both sides' activations (float32, as a trial holds them), warms
the index up on a few images, reads its RSS, computes the index and reads its peak RSS (getrusage). The
difference is the index's workspace, which the model predicts (the held activations are counted apart, as
the model counts them). A prediction should be at least the measurement (the model is what refuses a unit)
and not far above it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

# name -> (index, layout, images, sender shape, target shape, K for the DM distance)
CASES = {
    "cka-flatten": ("cka", "flatten", 2000, (64, 32, 32), (64, 32, 32), 0),
    "opd-flatten": ("opd", "flatten", 2000, (64, 32, 32), (64, 32, 32), 0),
    "cka-positions": ("cka", "positions", 1000, (64, 32, 32), (64, 32, 32), 0),
    "opd-positions": ("opd", "positions", 1000, (64, 32, 32), (64, 32, 32), 0),
    "pwcca-positions": ("pwcca", "positions", 1000, (64, 32, 32), (64, 32, 32), 0),
    "pwcca-pooled": ("pwcca", "pooled", 10000, (512, 4, 4), (512, 4, 4), 0),
    "rank-positions": ("rank", "positions", 1000, (64, 32, 32), (64, 32, 32), 0),
    "dm-positions": ("dm", "positions", 1000, (64, 32, 32), (128, 16, 16), 100),
}


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def _child(name: str) -> None:
    import resource

    import torch

    from sweep.measures.indices import Pair
    from sweep.registry import INDICES
    from sweep.stitching.stitcher import Stitcher

    torch.set_num_threads(2)
    index, layout, n, sa, sb, k = CASES[name]
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, *sa, generator=g), torch.randn(n, *sb, generator=g)
    fit = (torch.randn(k, *sa, generator=g), torch.randn(k, *sb, generator=g)) if k else None
    resize = Stitcher.for_shapes(torch.Size((1, *sa)), torch.Size((1, *sb))).resize

    def pair(m: int) -> Pair:
        return Pair(a[:m], b[:m], resize=resize, fit=(lambda: fit) if fit else None, layouts={index: layout})

    INDICES[index].values(pair(64))  # libraries and thread pools loaded
    before = _rss_mb()
    start = time.perf_counter()
    value = INDICES[index].values(pair(n))
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"workspace_mb": peak - before, "seconds": seconds, "value": value}))


def main() -> None:
    from sweep.costs.memory import ShapePair

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default=",".join(CASES))
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return _child(args.child)
    print(f"{'case':<16} {'images':>6} {'predicted MB':>12} {'measured MB':>11} {'ratio':>5} {'seconds':>7}")
    for name in args.only.split(","):
        index, layout, n, sa, sb, k = CASES[name]
        predicted = ShapePair(sa, sb, {index: layout}).index_bytes(index, n, k) / 2**20
        out = subprocess.run([sys.executable, __file__, "--child", name], capture_output=True, text=True)
        if out.returncode:
            print(f"{name}: failed\n{out.stderr[-2000:]}")
            continue
        got = json.loads(out.stdout.strip().splitlines()[-1])
        measured = got["workspace_mb"]
        print(
            f"{name:<16} {n:>6} {predicted:>12,.0f} {measured:>11,.0f} {predicted / max(measured, 1):>5.1f}"
            f" {got['seconds']:>7.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
