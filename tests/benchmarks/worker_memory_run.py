"""Each stage's worker peak RSS as a sweep runs it: `stitchsweep run` under Ray, one small unit per kind, at
CIFAR-10's shape, the peak of every Ray worker process sampled while each stage runs, above the worker's
after-imports baseline (`worker_baseline.py`'s figure, measured in the same run).

    .venv/bin/python tests/benchmarks/worker_memory_run.py [--work DIR] [--repo CHECKOUT] [--interval 0.2]
        [--wrn | --full-split] [--train]

The data are random images in CIFAR-10's own file format at its full size (50,000 training and 10,000 test
images, uint8 on disk: what a worker loads is the point), torchvision's md5 check switched off by a plugin of
the space (`trust.py`, imported by every worker as a user's plugin is). The donors are two freshly initialised
CIFAR ResNet-18s (`resnet18`) written into the zoo as if trained (`gpu_path.py`'s `random_zoo`): the donor
stage evaluates them and feeds the trials, and trains nothing. The space (below): one `dm` and one `tlm` trial
(1 epoch on 1,000 images) at `layer2.0`, a similarity unit (CKA at the stitch points, 1,000 test images), a
sensitivity test (`layer2.0`, ranks 64 and 8) and a t-SNE unit. `--repo` runs another checkout's code (its
`sweep` package) on the same data and zoo, for a before/after table. `--wrn`: the every-layer CKA of two random
WRN-28-10s instead (`points: modules`, 256 test images, batches of 128; the donor stage evaluates them on those).
`--full-split`: a `dm` trial on the paper's split instead (every training image but 500 for validation: what a
stitching worker holds of its data at the papers' scale; the fit reads 500 of them). `--train`: the donor stage
trains the two donors (one epoch on the 1,000 training images, batches of 128) instead of finding them in the zoo.

Prints one JSON line: each stage's Ray workers' peak RSS in MiB, the baseline and the excess, what `plan` says
each kind's largest unit needs (this checkout's `sweep.planning.worker_memory`, by part) and the wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from similarity_worker_memory import SPACE as UNIT_SPACE  # noqa: E402

TRUST = """# torchvision's md5 check of CIFAR-10's files, off: the benchmark's files are random images in its format
import torchvision

torchvision.datasets.CIFAR10._check_integrity = lambda self: True
torchvision.datasets.cifar.check_integrity = lambda path, md5=None: True
"""

SPACE = """
name: workermem
plugins: [trust.py]
data: {{dataset: cifar10, train_size: 1000, val_size: 500, test_size: 1000, download: false, root: {root}}}
donors:
  a: {{arch: resnet18, training: plain, epochs: 1, seed: 0}}
  b: {{arch: resnet18, training: plain, epochs: 1, seed: 1}}
stitching:
  - pairs: [{{front: zoo:a, end: zoo:b}}]
    stitch_points: [layer2.0]
    objectives: [dm, tlm]
    dm_samples: 500
    epochs: 1
    lr: 0.01
    indices: [cka]
    similarity_samples: 500
similarity:
  - pairs: [{{a: zoo:a, b: zoo:b}}]
    points: stitch
    images: 1000
representation_tests:
  - name: sensitivity_a
    test: sensitivity
    donors: [zoo:a]
    layers: [layer2.0]
    ranks: [64, 8]
    samples: 500
    probe: {{train_size: 1000, epochs: 1, lr: 0.01}}
tsne:
  - donors: [zoo:a]
    points: [layer2.0]
    images: 500
evaluation: {{n_eval_robust: 0}}
"""

# similarity_worker_memory.py's space, through `run`: its test images only (the donor stage evaluates on them)
WRN_SPACE = (
    UNIT_SPACE.replace("name: wrnmem", "name: workermem_wrn\nplugins: [trust.py]")
    .replace("download: false,", "test_size: 256, download: false,")
    .replace("{images}", "256")
    .replace("{batch}", "128")
    + "evaluation: {{n_eval_robust: 0}}\n"
)

# the papers' split (49,500 training images, 500 validation, the first 1,000 test images), one `dm` trial
FULL_SPACE = (
    SPACE.split("similarity:\n")[0]
    .replace("name: workermem", "name: workermem_full")
    .replace("train_size: 1000,", "train_size: null,")
    .replace("objectives: [dm, tlm]", "objectives: [dm]")
    + "evaluation: {{n_eval_robust: 0}}\n"
)

STAGE = re.compile(r"^\[sweep\] ([\w-]+): (starting workers|\d+ unit)")


def _rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _ray_workers() -> list[int]:
    """The pids of Ray's worker processes (their titles start with `ray::`), the driver's excluded."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if cmd.startswith(b"ray::") and b"IDLE" not in cmd[:16]:
            pids.append(int(entry.name))
    return pids


def _baseline(env: dict) -> float:
    """A fresh process's RSS after the imports a worker makes before its first unit (`worker_baseline.py`)."""
    from worker_baseline import CHILD

    out = subprocess.check_output([sys.executable, "-c", CHILD], text=True, env=env)
    return json.loads(out)["VmRSS"]


def _prepare(work: Path, space: str = SPACE) -> None:
    """Random CIFAR-10 files (once per work folder), the space and its two random donors in a zoo."""
    from gpu_path import space_with_zoo, write_cifar

    data = work / "data"
    if not (data / "cifar-10-batches-py" / "test_batch").is_file():
        write_cifar(data, 50000, 10000)
    (work / "space.yaml").write_text(space.format(root=json.dumps(str(data))))
    (work / "trust.py").write_text(TRUST)
    space_with_zoo(work / "space.yaml", work / "zoo", str(data))


def _planned(work: Path) -> dict:
    """`plan`'s need of each kind's largest unit of the space, in all and by part, in MiB."""
    from sweep.config.space import load_space
    from sweep.planning.worker_memory import unit_needs

    parts = ("donors", "images", "halves", "indices", "working", "runtime")
    needs = unit_needs(load_space(work / "space.yaml")).items()
    return {k: {"mb": round(n.bytes / 2**20), **{p: round(getattr(n, p) / 2**20) for p in parts}} for k, n in needs}


def _run(work: Path, repo: Path, interval: float, zoo: bool = True) -> dict:
    """`stitchsweep run` of the space into a fresh results folder (holding a copy of the zoo, unless the donor
    stage trains the donors), sampling the Ray workers' RSS by stage."""
    import shutil

    results = work / f"results-{os.getpid()}-{int(time.time())}"
    if zoo:
        shutil.copytree(work / "zoo", results)
    else:
        results.mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])))
    env["STITCHSWEEP_CACHE_DIR"] = str(results / "_node_cache")
    baseline = _baseline(env)
    peaks: dict[str, float] = {}
    stage = {"name": "start"}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for pid in _ray_workers():
                mb = _rss_mb(pid)
                if mb is not None:
                    peaks[stage["name"]] = max(peaks.get(stage["name"], 0.0), mb)
            time.sleep(interval)

    cmd = [sys.executable, "-m", "sweep", "run", str(work / "space.yaml"), "--storage", str(results), "--num-cpus", "2"]
    t0 = time.perf_counter()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = []
    for line in proc.stdout:
        log.append(line)
        if m := STAGE.match(line):
            stage["name"] = m.group(1)
    proc.wait()
    done.set()
    sampler.join()
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit("".join(log[-40:]))
    shutil.rmtree(results, ignore_errors=True)
    stages = {
        name: {"peak_mb": round(mb), "above_baseline_mb": round(mb - baseline)}
        for name, mb in peaks.items()
        if name != "start"
    }
    return {
        "repo": str(repo),
        "baseline_mb": round(baseline),
        "stages": stages,
        "wall_s": round(wall),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="", help="a folder kept between runs (data, zoo); default: temporary")
    parser.add_argument("--repo", default=str(REPO), help="the checkout whose code runs the sweep")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between RSS samples")
    parser.add_argument(
        "--wrn", action="store_true", help="the every-layer CKA of two WRN-28-10s instead (256 images, batches of 128)"
    )
    parser.add_argument(
        "--full-split", action="store_true", help="a dm trial on the papers' split (49,500 training images) instead"
    )
    parser.add_argument("--train", action="store_true", help="the donor stage trains the donors (no zoo)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        _prepare(work, WRN_SPACE if args.wrn else FULL_SPACE if args.full_split else SPACE)
        result = _run(work, Path(args.repo).resolve(), args.interval, zoo=not args.train)
        result["planned_mb"] = _planned(work)
        print(json.dumps(result), flush=True)
        print(json.dumps({"load_average": os.getloadavg()}))


if __name__ == "__main__":
    main()
