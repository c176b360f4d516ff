"""Peak memory of the minibatch CKA estimator as the number of images grows (Cianfarani et al. 2022's CKA
matrices over a test set): it must stay flat, since only one batch's Grams and the P x Q accumulators are held.

    python tests/benchmarks/cka_memory.py [--images 2048] [--features 40000] [--points 4]

Runs the estimator in a fresh process for N and 10 N images (batches of 1,024 drawn on the fly, as a forward
pass would produce them) and prints each process's peak RSS and wall time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time


def _child(images: int, features: int, points: int, batch: int) -> None:
    import resource

    import torch

    from sweep.measures.similarity import MinibatchCKA

    acc = MinibatchCKA()
    gen = torch.Generator().manual_seed(0)
    t0 = time.perf_counter()
    for start in range(0, images, batch):
        n = min(batch, images - start)
        if n <= 3:
            continue
        base = torch.randn(n, features, generator=gen)
        reps = [base + 0.5 * p * torch.randn(n, features, generator=gen) for p in range(points)]
        acc.update(reps, reps)
    value = acc.value()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "images": images,
                "peak_rss_mb": round(peak_mb),
                "wall_s": round(time.perf_counter() - t0, 1),
                "cka_01": round(float(value[0, 1]), 4),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2048)
    parser.add_argument("--features", type=int, default=40000)
    parser.add_argument("--points", type=int, default=4)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.images, args.features, args.points, args.batch)
        return
    for images in (args.images, 10 * args.images):
        cmd = [sys.executable, __file__, "--child", "--images", str(images), "--features", str(args.features)]
        cmd += ["--points", str(args.points), "--batch", str(args.batch)]
        print(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip(), flush=True)


if __name__ == "__main__":
    main()
