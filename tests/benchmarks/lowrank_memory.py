"""Peak memory of a sensitivity test's low-rank basis (`sweep.kinds.reptest.run.LowRank`: the centred SVD of a
layer's channel rows on `probe_train_size` training images) above the activations it is given, against the
float64 rows it decomposes: the factor `sweep.kinds.reptest.cost.LOWRANK` models.

    .venv/bin/python tests/benchmarks/lowrank_memory.py [--images 1000] [--shape 128 16 16] [--rank 64]

Each size runs in a fresh process (random activations, seeded); prints one JSON line: the peak above the
activations in MiB, the float64 rows' MiB and their ratio.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from similarity_worker_memory import _mb, in_fresh_process  # noqa: E402


def _child(images: int, shape: list[int], rank: int) -> None:
    import torch

    from sweep.kinds.reptest.run import LowRank

    torch.set_num_threads(2)
    acts = torch.randn(images, *shape, generator=torch.Generator().manual_seed(0))
    start = _mb("VmRSS")
    LowRank(acts, rank)
    rows = 8 * images * math.prod(shape) / 2**20
    above = _mb("VmHWM") - start
    print(json.dumps({"images": images, "shape": shape, "peak_above_mb": round(above), "rows_f64_mb": round(rows),
                      "ratio": round(above / rows, 2)}))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, nargs="+", default=[1000])
    parser.add_argument("--shape", type=int, nargs="+", default=[128, 16, 16])
    parser.add_argument("--rank", type=int, default=64)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.images[0], args.shape, args.rank)
        return
    for n in args.images:
        shape = [str(s) for s in args.shape]
        print(in_fresh_process(__file__, "--child", "--images", str(n), "--shape", *shape, "--rank", str(args.rank)))


if __name__ == "__main__":
    main()
