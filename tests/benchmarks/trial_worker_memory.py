"""Peak memory of one stitching trial run as a sweep's worker runs it, phase by phase, beside what `plan` says the
unit needs (`sweep.planning.worker_memory`): where a stitching worker's memory goes.

    .venv/bin/python tests/benchmarks/trial_worker_memory.py [--work DIR] [--objectives dm tlm] [--test-size N]
        [--point layer2.0]

The data are random images in CIFAR-10's own file format at its full size (50,000 training and 10,000 test
images), torchvision's md5 check switched off in the benchmark's processes; the donors are two freshly
initialised CIFAR ResNet-18s written into the zoo by `gpu_path.py`'s `random_zoo`; the trials are
`worker_memory_run.py`'s (`layer2.0`, 1,000 training, 500 validation and 1,000 test images, CKA on 500, one
epoch; `--test-size`: another number of test images, whose frozen halves the trial keeps while they fit the
cache's budget; `--point`: another stitch point). Each objective's trial runs through the kind's `record_trial`
with a `RunContext` and the worker cache configured as the Ray trainable configures it, in a fresh process, which
prints one JSON line: its peak RSS and its after-imports RSS, the phases (RSS, the peak so far and the worker
cache's MiB after each: the split, the parts, the frozen halves' reads, the indices, the fit, the evaluation), and
`plan`'s need of the unit by part.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from similarity_worker_memory import _mb, in_fresh_process  # noqa: E402
from worker_memory_run import SPACE, TRUST  # noqa: E402

STITCH_SPACE = SPACE.split("similarity:\n")[0] + "evaluation: {{n_eval_robust: 0}}\n"


def _child(work: Path, objective: str) -> None:
    import torch
    from gpu_path import trust_files

    import sweep.worker.activations as activations
    from sweep.kinds.base import RunContext
    from sweep.kinds.trial import run as trial
    from sweep.registry import KINDS
    from sweep.store.results import SweepDir
    from sweep.worker.cache import configure

    trust_files()
    torch.set_num_threads(2)
    name, specs = pickle.loads((work / "units.pkl").read_bytes())  # shipped as the backend ships them
    spec = next(s for s in specs if s.objective == objective)
    env = {k: v for k, v in os.environ.items() if k.startswith("STITCHSWEEP_CACHE")}
    cache = configure(env, KINDS["trial"].shares_halves([spec]))  # as the trainable configures it
    start = _mb("VmRSS")
    phases: list[dict] = []

    def mark(what: str) -> None:
        phases.append({"after": what, "rss_mb": round(_mb("VmRSS")), "peak_mb": round(_mb("VmHWM")),
                       "cache_mb": round(cache.bytes / 2**20)})  # fmt: skip

    def traced(module, step: str) -> None:
        fn = getattr(module, step)

        def call(*args, **kwargs):
            out = fn(*args, **kwargs)
            mark(step)
            return out

        setattr(module, step, call)

    for step in ("_splits", "assemble", "_reference_accuracies", "similarities", "save_stitcher", "_evaluate"):
        traced(trial, step)  # save_stitcher: right after the fit
    on = activations.Frozen.on

    def read(self, part, n=None, precision="fp32"):
        out = on(self, part, n, precision)
        mark(f"halves {part} {tuple(out.shape)}")
        return out

    activations.Frozen.on = read
    sweep_dir = SweepDir(str(work / "results"), name)
    sweep_dir.trial_part(spec.trial_id).unlink(missing_ok=True)
    row = trial.record_trial(spec, RunContext(sweep_dir, torch.device("cpu"), str(work / "data"), False))
    if row.get("status") != "done":
        raise RuntimeError(f"the trial did not finish: {row.get('error')}")
    print(json.dumps({"objective": objective, "start_mb": round(start), "peak_rss_mb": round(_mb("VmHWM")),
                      "phases": phases}))  # fmt: skip


def _prepare(work: Path, test_size: int, point: str) -> None:
    """Random CIFAR-10 files, the space, its two random donors in the zoo and its trials (once per folder)."""
    from gpu_path import space_with_zoo, write_cifar

    from sweep.registry import KINDS

    data = work / "data"
    if not (data / "cifar-10-batches-py" / "test_batch").is_file():
        write_cifar(data, 50000, 10000)
    space = STITCH_SPACE.replace("test_size: 1000,", f"test_size: {test_size},")
    space = space.replace("stitch_points: [layer2.0]", f"stitch_points: [{point}]")
    (work / "space.yaml").write_text(space.format(root=json.dumps(str(data))))
    (work / "trust.py").write_text(TRUST)
    sweep, _ = space_with_zoo(work / "space.yaml", work / "results", str(data))
    (work / "units.pkl").write_bytes(pickle.dumps((sweep.name, list(KINDS["trial"].units(sweep).values()))))


def _planned(work: Path) -> dict:
    """`plan`'s need of the space's largest trial unit, by part, in MiB."""
    from sweep.config.space import load_space
    from sweep.planning.worker_memory import unit_needs

    need = unit_needs(load_space(work / "space.yaml"))["trial"]
    parts = ("donors", "images", "halves", "indices", "working", "runtime")
    # (getattr: an older checkout, run for a before/after table, counts no halves or working memory)
    return {"planned_mb": round(need.bytes / 2**20), **{p: round(getattr(need, p, 0) / 2**20) for p in parts}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="", help="a folder kept between runs (data, zoo); default: temporary")
    parser.add_argument("--objectives", nargs="+", default=["dm", "tlm"])
    parser.add_argument("--test-size", type=int, default=1000, help="the trials' test images")
    parser.add_argument("--point", default="layer2.0", help="the trials' stitch point (a CIFAR ResNet-18's)")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(Path(args.work), args.child)
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        _prepare(work, args.test_size, args.point)
        print(json.dumps(_planned(work)), flush=True)
        for objective in args.objectives:
            print(in_fresh_process(__file__, "--child", objective, "--work", str(work)), flush=True)
        print(json.dumps({"load_average": os.getloadavg()}))


if __name__ == "__main__":
    main()
