"""A Jones et al. inversion unit at the paper's size: 10,000 images at 224 px, stored as uint8, read from a
streamed image folder (`sweep.data.stream`), with a small network so that it runs on a CPU (`resnet_tiny`,
random weights, a checkpoint you bring as a file donor; `--steps` gradient steps instead of 2,000: the disk and
memory a unit needs do not depend on the steps or the network's depth, only on the images and the dtype).

1. An uninterrupted run: the bytes the unit writes (its shards and index) and the unit process's peak resident
   memory, against the same unit's on 1,000 images (one shard): holding one shard at a time, the peak does not
   grow with the images (all 10,000 as float32 would be 6.0 GB).
2. A run killed (SIGKILL) once its third shard is written, then run again: it resumes from its last complete
   shard, and its stored images are compared with the uninterrupted run's.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/inversion_disk.py --folder /tmp/stream_bench --work /tmp/inv_bench

`--folder` is a folder of JPEG class folders (`tests/benchmarks/stream_folder.py` writes one of 20,000): it
serves as both the train and val split of a registered 224-px dataset.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

IMAGES, SHARD_BYTES_F32 = 10000, 1000 * 3 * 224 * 224 * 4


def space(work: Path, steps: int, images: int) -> dict:
    return {
        "name": "inversion_disk",
        "data": {"dataset": "bench224", "root": str(work / "data"), "download": False, "val_size": 0,
                 "test_size": IMAGES},
        "donors": {"f": {"file": str(work / "resnet_tiny.pt"), "arch": "resnet_tiny",
                         "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}},
        "inversions": [{"name": "inv", "donors": ["file:f"], "recipe": "jones", "images": images, "steps": steps,
                        "batch_size": 100, "dtype": "uint8"}],
        "evaluation": {"n_eval_robust": 0},
    }  # fmt: skip


def child(work: Path, results: str, steps: int, workers: int, images: int, stage: str) -> None:
    """Run the donor stage (`stage` "donor": the file donor into the zoo) or the one inversion unit of
    `images` images into `results`, in this process; print its peak RSS and status as JSON."""
    import torch

    from sweep.config.space import parse_space
    from sweep.data import stream
    from sweep.data.declared import register_image_folder
    from sweep.kinds.base import RunContext, resolve
    from sweep.kinds.inversion.run import run_inversion
    from sweep.registry import KINDS
    from sweep.store.results import SweepDir

    torch.set_num_threads(max(1, (os.cpu_count() or 1)))
    stream.configure(workers)
    register_image_folder("bench224", "bench", 20000, 20000, 224, resize=256, num_classes=100)
    sweep = parse_space(space(work, steps, images))
    sweep_dir = SweepDir(work / results, sweep.name)
    sweep_dir.create()
    ctx = RunContext(sweep_dir, torch.device("cpu"), str(work / "data"), False)
    t0 = time.perf_counter()
    (unit,) = sweep.units["inversion"]
    if stage == "donor":
        donors = KINDS.get_entry("donor")
        out = [resolve(donors.run)(donor, ctx) for donor in donors.units(sweep).values()][0]
    else:
        out = run_inversion(unit, ctx)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"status": out["status"], "error": out.get("error"), "peak": peak, "uid": unit.unit_id,
                      "wall": time.perf_counter() - t0}), flush=True)  # fmt: skip


def prepare(folder: Path, work: Path) -> None:
    import torch

    from sweep.models.base import build

    data = work / "data" / "bench"
    data.mkdir(parents=True, exist_ok=True)
    for split in ("train", "val"):
        if not (data / split).exists():
            (data / split).symlink_to(folder.resolve())
    torch.manual_seed(0)
    model = build("resnet_tiny", 3, 100, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225), 224)
    torch.save(model.state_dict(), work / "resnet_tiny.pt")


def run(work: Path, results: str, args, images: int = IMAGES, kill_after: int | None = None) -> dict | None:
    """The donor stage, then the inversion unit, each in a process of its own (the unit's peak RSS is its own);
    with `kill_after`, the unit is killed (SIGKILL) once that many shards are written."""
    base = [sys.executable, __file__, "--work", str(work), "--steps", str(args.steps), "--workers", str(args.workers)]
    base += ["--images", str(images), "--child", results]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    donor = subprocess.run([*base, "--stage", "donor"], capture_output=True, text=True, env=env)
    if json.loads(donor.stdout.strip().splitlines()[-1])["status"] not in ("done", "skipped"):
        raise SystemExit(f"the donor stage failed: {donor.stdout[-1000:]}")
    proc = subprocess.Popen([*base, "--stage", "invert"], stdout=subprocess.PIPE, text=True, env=env)
    if kill_after is None:
        out, _ = proc.communicate()
        got = json.loads(out.strip().splitlines()[-1])
        if got["status"] != "done":
            raise SystemExit(f"the inversion unit failed: {got['error']}")
        return got
    shard = None
    while proc.poll() is None:
        found = sorted((work / results).rglob(f"shard-{kill_after - 1:05d}.npz"))
        if found:
            shard = found[0]
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.5)
    proc.wait()
    print(f"killed after {shard.name if shard else 'the end (no kill)'}")
    return None


def written(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and "inverted" in p.parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folder", type=Path, default=Path("/tmp/stream_bench"))
    ap.add_argument("--work", type=Path, default=Path("/tmp/inv_bench"))
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--workers", type=int, default=max(0, (os.cpu_count() or 1) - 1))
    ap.add_argument("--images", type=int, default=IMAGES)
    ap.add_argument("--child", default=None)
    ap.add_argument("--stage", default="invert")
    args = ap.parse_args()
    if args.child:
        return child(args.work, args.child, args.steps, args.workers, args.images, args.stage)
    for results in ("one", "whole", "killed"):
        shutil.rmtree(args.work / results, ignore_errors=True)
    prepare(args.folder, args.work)
    one = run(args.work, "one", args, images=1000)
    print(f"one shard (1,000 images): done in {one['wall']:.0f} s; wrote {written(args.work / 'one') / 1e9:.3f} GB;"
          f" peak RSS {one['peak'] / 1e9:.2f} GB")  # fmt: skip
    whole = run(args.work, "whole", args)
    wrote = written(args.work / "whole") / 1e9
    all_f32 = IMAGES * SHARD_BYTES_F32 / 1000 / 1e9
    print(f"{IMAGES} images: done in {whole['wall']:.0f} s; wrote {wrote:.3f} GB; peak RSS {whole['peak'] / 1e9:.2f} GB"
          f" (as float32: one shard {SHARD_BYTES_F32 / 1e9:.2f} GB, all {all_f32:.1f} GB)")  # fmt: skip
    run(args.work, "killed", args, kill_after=3)
    again = run(args.work, "killed", args)
    print(f"resumed: done in {again['wall']:.0f} s, peak RSS {again['peak'] / 1e9:.2f} GB")
    from sweep.store import inverted as stored

    a, b = (stored.inverted(args.work / r / "inversion_disk", whole["uid"]) for r in ("whole", "killed"))
    diff = np.abs(a - b).max() if a.shape == b.shape else "shapes differ"
    print(f"stored images {a.shape}: identical {a.shape == b.shape and np.array_equal(a, b)}, max |d| {diff}")


if __name__ == "__main__":
    main()
