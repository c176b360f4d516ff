"""Peak memory of one similarity unit run as a sweep's worker runs it: every-layer CKA (`points: modules`) of
two WRN-28-10s on CIFAR-10, batches of 128, through the kind's `run_similarity` with a `RunContext` and the
worker cache configured as the Ray trainable configures it (`sweep.backends.ray._trainable`), beside what
`cka_modules_memory.py` measures for the reading alone.

    .venv/bin/python tests/benchmarks/similarity_worker_memory.py [--images 256] [--batch 128] [--work DIR]

The data are random images in CIFAR-10's own file format at its full size (50,000 training and 10,000 test
images: what a worker loads is the point), torchvision's md5 check switched off in the benchmark's processes;
the donors are freshly initialised WRN-28-10s written into the zoo by `gpu_path.py`'s `random_zoo` (one
initialisation for both: memory does not depend on the weights, and the unit reads A and B apart). The unit
runs in a fresh process, which prints one JSON line: its peak RSS, the phases (RSS and the peak so far after
each: the unit's data, each donor, each side's accuracy, each batch of CKA), the worker cache's MiB, the wall
time and the matrix's checksum (the matrix itself goes to `--out` as .npy when given, to compare runs of
two versions of the code).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

SPACE = """
name: wrnmem
data: {{dataset: cifar10, val_size: 1000, download: false, root: {root}}}
donors:
  a: {{arch: wrn28_10, training: plain, epochs: 1, seed: 0}}
  b: {{arch: wrn28_10, training: plain, epochs: 1, seed: 1}}
similarity:
  - name: layers
    pairs: [{{a: zoo:a, b: zoo:b}}]
    points: modules
    images: {images}
    batch_size: {batch}
    passes: 1
"""


def in_fresh_process(script: str, *args: str) -> str:
    """`script ARGS` run in a fresh Python process with this checkout on its path: its standard output (its
    standard error's end, as the exit, when it fails)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return done.stdout.strip()


def _mb(field: str) -> float:
    """VmRSS (now) or VmHWM (the peak so far) of this process, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def _instrument(module, phases: list) -> None:
    """Record the RSS after each call of the unit's steps (whichever of these names the module uses)."""

    def traced(name, fn):
        def call(*args, **kwargs):
            out = fn(*args, **kwargs)
            phases.append({"after": name, "rss_mb": round(_mb("VmRSS")), "peak_mb": round(_mb("VmHWM"))})
            return out

        return call

    for name in ("worker_splits", "unit_images", "load_donor", "accuracy", "gram_reader", "minibatch_matrix"):
        if hasattr(module, name):
            setattr(module, name, traced(name, getattr(module, name)))


def _child(work: Path, out: str) -> None:
    import numpy as np
    import torch
    from gpu_path import trust_files

    from sweep.kinds.base import RunContext
    from sweep.kinds.similarity import run as similarity
    from sweep.registry import KINDS
    from sweep.store.results import SweepDir
    from sweep.worker.cache import configure

    trust_files()
    torch.set_num_threads(2)
    name, spec = pickle.loads((work / "unit.pkl").read_bytes())  # shipped as the backend ships it: no space parsed
    env = {k: v for k, v in os.environ.items() if k.startswith("STITCHSWEEP_CACHE")}
    cache = configure(env, KINDS["similarity"].shares_halves([spec]))  # as the trainable configures it
    sweep_dir = SweepDir(str(work / "results"), name)
    sweep_dir.part("similarity", spec.unit_id).unlink(missing_ok=True)
    phases = [{"after": "start", "rss_mb": round(_mb("VmRSS")), "peak_mb": round(_mb("VmHWM"))}]
    _instrument(similarity, phases)

    def report(metrics: dict) -> None:
        phases.append({"after": f"report {metrics}", "rss_mb": round(_mb("VmRSS")), "peak_mb": round(_mb("VmHWM"))})

    ctx = RunContext(sweep_dir, torch.device("cpu"), str(work / "data"), False, report=report)
    t0 = time.perf_counter()
    status = similarity.run_similarity(spec, ctx)
    wall = time.perf_counter() - t0
    if status.get("status") != "done":
        raise RuntimeError(f"the unit did not finish: {status}")
    import pyarrow.parquet as pq

    rows = pq.read_table(sweep_dir.part("similarity", spec.unit_id).path).to_pandas()
    matrix = rows.pivot(index="a_index", columns="b_index", values="cka").to_numpy()
    if out:
        np.save(out, matrix)
    result = {
        "peak_rss_mb": round(_mb("VmHWM")),
        "cache_mb": round(cache.bytes / 2**20),
        "points": len(spec.a_points),
        "wall_s": round(wall, 1),
        "cka_sum": float(matrix.sum()),
        "phases": phases,
    }
    print(json.dumps(result))


def _prepare(work: Path, images: int, batch: int) -> None:
    """Random CIFAR-10 files, the space and the two random donors in the zoo (once per work folder)."""
    from gpu_path import space_with_zoo, write_cifar

    from sweep.registry import KINDS

    data = work / "data"
    if not (data / "cifar-10-batches-py" / "test_batch").is_file():
        write_cifar(data, 50000, 10000)
    (work / "space.yaml").write_text(SPACE.format(root=json.dumps(str(data)), images=images, batch=batch))
    sweep, _ = space_with_zoo(work / "space.yaml", work / "results", str(data))
    spec = next(iter(KINDS["similarity"].units(sweep).values()))
    (work / "unit.pkl").write_bytes(pickle.dumps((sweep.name, spec)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--work", default="", help="a folder kept between runs (data, zoo); default: temporary")
    parser.add_argument("--out", default="", help="where the child saves the CKA matrix (.npy)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(Path(args.work), args.out)
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        _prepare(work, args.images, args.batch)
        from sweep.data.core import load_pool

        load_pool.cache_clear()  # this process only waits: the dataset it read for the zoo goes
        print(in_fresh_process(__file__, "--child", "--work", str(work), "--out", args.out), flush=True)
        print(json.dumps({"load_average": os.getloadavg()}))


if __name__ == "__main__":
    main()
