"""Peak memory of every-layer CKA (`points: modules`) between two random WideResNet-28-10s, the similarity
unit's reading path against the one that held every node's activations of a batch at once (Cianfarani et al.
2022 compare WRN-28-10s at every layer).

    python tests/benchmarks/cka_modules_memory.py [--images 256] [--batch 128] [--size 28] [--device cuda]

Each way runs in a fresh process (peak RSS from getrusage, which includes the two networks and Torch itself)
on the same random images and networks (seeds 0 and 1); the script prints each process's peak RSS, what the
measuring added to the RSS before it (`measure_mb`), `sweep.planning.memory`'s prediction of that (at 32 px, where the
images are CIFAR-10's), on a GPU the device's peak allocation while measuring (`device_measure_mb`), the wall
time and the largest difference between the two CKA matrices.

- `held`: `features()` returns every node's activation of the batch, then their Grams (the unit before the
  bounded-memory work).
- `hooks`: `gram_reader()` (what the unit runs): each node's Gram as the node runs, its activation then freed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _child(way: str, images: int, batch: int, size: int, out: str, device: str) -> None:
    import resource

    import numpy as np
    import torch

    from sweep.kinds.similarity.run import gram_reader
    from sweep.measures.similarity import MinibatchCKA, minibatches
    from sweep.models.base import build, graph_nodes
    from sweep.models.features import features

    torch.set_num_threads(2)
    nets = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        nets.append(build("wrn28_10", 3, 10, (0.5,) * 3, (0.25,) * 3, image_size=size).eval().to(device))
    points = tuple(n for n in graph_nodes("wrn28_10") if n != "x")
    x = torch.randn(images, 3, size, size, generator=torch.Generator().manual_seed(2)).to(device)
    cuda = device.startswith("cuda")
    before_device = torch.cuda.memory_allocated() if cuda else 0
    acc = MinibatchCKA()
    before_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Torch, the networks, the images
    t0 = time.perf_counter()
    for _, idx in minibatches(images, batch, 1, 0):
        with torch.no_grad():
            if way == "held":
                acc.update(features(nets[0], points)(x[idx]), features(nets[1], points)(x[idx]))
            else:
                acc.update_grams(gram_reader(nets[0], points)(x[idx]), gram_reader(nets[1], points)(x[idx]))
    matrix = acc.value().cpu().numpy()
    np.save(out, matrix)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "way": way,
                "points": len(points),
                "peak_rss_mb": round(peak_mb),
                "measure_mb": round(peak_mb - before_mb),
                "predicted_mb": _predicted(points, batch, size) if way == "hooks" else None,
                **(
                    {"device_measure_mb": round((torch.cuda.max_memory_allocated() - before_device) / 2**20)}
                    if cuda
                    else {}
                ),
                "wall_s": round(time.perf_counter() - t0, 1),
            }
        )
    )


def _predicted(points: tuple[str, ...], batch: int, size: int) -> int | None:
    """`sweep.planning.memory`'s need for this unit (a similarity unit on CIFAR-10's 3 x 32 x 32 images), in MB."""
    if size != 32:
        return None
    from types import SimpleNamespace

    from sweep.planning import memory

    sides = dict(a_arch="wrn28_10", b_arch="wrn28_10", a_points=points, b_points=points, a_inputs="benign")
    spec = SimpleNamespace(measure="cka", dataset="cifar10", a_key="a", b_key="b", b_inputs="benign", **sides)
    spec = SimpleNamespace(**vars(spec), estimator="minibatch", batch_size=batch, images=batch, label="benchmark")
    return round(memory.similarity_need(spec).bytes / 2**20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--size", type=int, default=28)
    parser.add_argument("--ways", default="hooks,held", help="comma-separated: hooks, held")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda: also the device's peak allocation")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.images, args.batch, args.size, args.out, args.device)
        return
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        matrices = {}
        for way in args.ways.split(","):
            out = str(Path(tmp) / f"{way}.npy")
            cmd = [sys.executable, __file__, "--child", way, "--out", out]
            cmd += ["--images", str(args.images), "--batch", str(args.batch), "--size", str(args.size)]
            cmd += ["--device", args.device]
            print(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip(), flush=True)
            matrices[way] = np.load(out)
        if len(matrices) == 2:
            a, b = matrices.values()
            print(json.dumps({"max_abs_cka_difference": float(np.abs(a - b).max()), "cells": int(a.size)}))


if __name__ == "__main__":
    main()
