"""How the workers of a node share cached activations: Ray's object store against memory-mapped files on
node-local disk (what `sweep.worker.cache` does), measured between two Ray worker processes of one node.

One worker publishes a float32 tensor of --mb megabytes (as a front's activations on a training split), a
second one reads it and touches every page (a sum). For the object store: `ray.put` of the array, its
reference handed to the reader, `ray.get` (zero-copy). For files: `torch.save` to a temporary name and a
rename, then `torch.load(..., mmap=True)`. Best of --repeats.

    .venv/bin/python tests/benchmarks/share_activations.py [--mb 1024] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import ray


@ray.remote
def put_array(mb: int):
    import numpy as np

    a = np.random.default_rng(0).random(mb * 2**18, dtype=np.float32)
    t0 = time.perf_counter()
    ref = ray.put(a)
    return [ref], time.perf_counter() - t0


@ray.remote
def get_array(refs):
    t0 = time.perf_counter()
    a = ray.get(refs[0])
    total = float(a.sum())
    return time.perf_counter() - t0, total


@ray.remote
def save_file(mb: int, path: str):
    import torch

    t = torch.from_numpy(__import__("numpy").random.default_rng(0).random(mb * 2**18, dtype="float32"))
    t0 = time.perf_counter()
    tmp = path + ".tmp"
    torch.save(t, tmp)
    os.replace(tmp, path)
    return time.perf_counter() - t0


@ray.remote
def load_file(path: str):
    import torch

    t0 = time.perf_counter()
    t = torch.load(path, mmap=True, weights_only=True)
    total = float(t.sum())
    return time.perf_counter() - t0, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=3 * args.mb * 2**20)
    best = {"store: publish": 1e9, "store: read": 1e9, "files: publish": 1e9, "files: read": 1e9}
    folder = tempfile.mkdtemp(prefix="share_activations_")
    for i in range(args.repeats):
        refs, put_s = ray.get(put_array.remote(args.mb))
        get_s, s1 = ray.get(get_array.remote(refs))
        del refs
        path = os.path.join(folder, f"acts{i}.pt")
        save_s = ray.get(save_file.remote(args.mb, path))
        load_s, s2 = ray.get(load_file.remote(path))
        assert abs(s1 - s2) <= 1e-3 * abs(s1), (s1, s2)
        for k, v in zip(best, (put_s, get_s, save_s, load_s)):
            best[k] = min(best[k], v)
        os.remove(path)
    print(f"{args.mb} MB float32 between two Ray workers of one node, best of {args.repeats}:")
    for k, v in best.items():
        print(f"  {k:16} {v:6.2f} s")
    ray.shutdown()


if __name__ == "__main__":
    main()
