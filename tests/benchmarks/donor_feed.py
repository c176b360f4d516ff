"""The donor stage's pass that feeds the trials' frozen halves (`sweep/worker/feed.py`) against the two passes it
replaces, in one process, interleaved, median of `--rounds`: before, the donor stage predicted the test images
(clean accuracy) and computed its logits again for the kept predictions, and the trial then ran its front over
the same images; now one pass gives the logits and writes the front's chunk files, which the trial (its memory
empty, as another worker) reads. Needs a sweep whose zoo holds one donor, e.g. item 1 of peer_side_by_side.py:

    PYTHONPATH=. .venv/bin/python tests/benchmarks/donor_feed.py --storage /tmp/bench_peer/ours \\
        --sweep peer_item1 --data-root PEER/data/pytorch --point layer2.1
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch

from sweep.data.core import test_images
from sweep.models.base import split
from sweep.store.results import SweepDir
from sweep.train.evaluate import predict
from sweep.worker import cache
from sweep.worker.activations import Frozen, compute
from sweep.worker.feed import feed
from sweep.worker.splits import worker_splits
from sweep.worker.zoo import load_donor


def one(side: str, sd: SweepDir, key: str, x, splits, point: str, cpu) -> tuple[float, float]:
    """(seconds of the donor stage's passes, seconds of the trial's front on the test images)."""
    c = cache.configure({cache.DIR_ENV: tempfile.mkdtemp(prefix="donor_feed_")})
    c.clear()
    model = load_donor(sd, key, cpu)
    t0 = time.perf_counter()
    if side == "before":
        predict(model, x, cpu)
        compute(model, x, cpu)
    else:
        feed(model, x, cpu, [(splits, point, "fp32", False)], logits=True)
    t1 = time.perf_counter()
    c.clear()  # the trial in another worker of the node: the node's files only
    front, _ = split(load_donor(sd, key, cpu), point)
    Frozen(front, (*model.checkpoint_identity, point), splits, cpu).on("test")
    return t1 - t0, time.perf_counter() - t1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--storage", required=True)
    ap.add_argument("--sweep", default="peer_item1")
    ap.add_argument("--data-root", required=True)
    ap.add_argument("--dataset", default="fashion_mnist")
    ap.add_argument("--sizes", default="4000,0,1000", help="the trial's train, val and test sizes")
    ap.add_argument("--point", default="layer2.1")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(2)
    cpu = torch.device("cpu")
    sd = SweepDir(args.storage, args.sweep)
    (key,) = os.listdir(os.path.join(args.storage, "zoo"))
    train, val, test = (int(v) for v in args.sizes.split(","))
    x, _ = test_images(args.dataset, test, args.data_root)
    splits = worker_splits(args.dataset, train, val, test, cpu, root=args.data_root)
    print(f"load average {os.getloadavg()}")
    res: dict[str, list] = {"before": [], "now": []}
    for r in range(args.rounds):
        for side in ("before", "now") if r % 2 == 0 else ("now", "before"):
            donor_s, front_s = one(side, sd, key, x, splits, args.point, cpu)
            res[side].append((donor_s, front_s))
            print(f"{side}: donor stage {donor_s:.2f} s, the trial's front on the test images {front_s:.2f} s")
    for side, v in res.items():
        d, f = statistics.median(a for a, _ in v), statistics.median(b for _, b in v)
        print(f"{side} (median): donor stage {d:.2f} s + trial's front {f:.2f} s = {d + f:.2f} s")
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
