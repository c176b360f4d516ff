"""Peak memory of one donor unit (trained) or one representation-test unit run alone, as a worker runs it, beside
what `plan` says it needs (`sweep.planning.worker_memory`): the "alone" column of docs/performance.md's table of
`plan` against measured (the stitching trial's is `trial_worker_memory.py`).

    .venv/bin/python tests/benchmarks/unit_worker_memory.py --work DIR [--kinds donor reptest]

`DIR`: a folder `worker_memory_run.py --work DIR` has prepared (CIFAR-10's files of random images, its space, two
random ResNet-18s in its zoo). The donor unit trains its donor (one epoch on 1,000 images, batches of 128) into a
fresh results folder, then evaluates it and feeds the trials' halves; the representation test (ranks 64 and 8 at
`layer2.0`) reads the donor from a fresh copy of the zoo. Each runs through the kind's `run_unit` with the worker
cache configured, in a fresh process that samples its RSS every 20 ms and prints one JSON line: its RSS after
imports, its peak, the peak while each of the unit's main functions ran, and `plan`'s need of the kind's largest
unit by part, in MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from similarity_worker_memory import _mb, in_fresh_process  # noqa: E402

TRACED = {  # the functions whose peaks are reported, by kind: (module, name)
    "donor": [
        ("sweep.train.donors", "train_donor"),
        ("sweep.train.donors", "validation"),
        ("sweep.kinds.donor.run", "_evaluate"),
    ],  # fmt: skip
    "reptest": [
        ("sweep.kinds.reptest.run", "_fronts"),
        ("sweep.kinds.reptest.run", "linear_probe_accuracy"),
        ("sweep.kinds.reptest.run", "_dissimilarities"),
    ],  # fmt: skip
}


def _child(work: Path, kind: str) -> None:
    import importlib

    import torch
    from gpu_path import trust_files

    from sweep.config.space import load_space
    from sweep.kinds.base import RunContext
    from sweep.registry import KINDS, resolve
    from sweep.store.results import SweepDir
    from sweep.worker.cache import configure

    trust_files()
    torch.set_num_threads(1)
    sweep = load_space(work / "space.yaml")
    root = work / "unit-results"  # a fresh folder: empty (the donor unit trains its donor) or a copy of the zoo
    shutil.rmtree(root, ignore_errors=True)
    if kind != "donor":
        shutil.copytree(work / "zoo", root)
    sweep_dir = SweepDir(str(root), sweep.name)
    sweep_dir.create()
    unit = next(iter(KINDS[kind].units(sweep).values()))
    configure({k: v for k, v in os.environ.items() if k.startswith("STITCHSWEEP_CACHE")})
    now, peaks = ["unit"], {}

    def sample() -> None:
        while True:
            peaks[now[-1]] = max(peaks.get(now[-1], 0.0), _mb("VmRSS"))
            time.sleep(0.02)

    for module, name in TRACED[kind]:
        mod = importlib.import_module(module)

        def traced(*args, _fn=getattr(mod, name), _name=name, **kwargs):
            now.append(_name)
            try:
                return _fn(*args, **kwargs)
            finally:
                now.pop()

        setattr(mod, name, traced)
    start = _mb("VmRSS")
    threading.Thread(target=sample, daemon=True).start()
    row = resolve(KINDS[kind].run)(unit, RunContext(sweep_dir, torch.device("cpu"), str(work / "data"), False))
    if row.get("status") != "done":
        raise RuntimeError(f"the unit did not finish: {row}")
    phases = {k: round(v) for k, v in peaks.items()}
    print(json.dumps({"kind": kind, "start_mb": round(start), "peak_mb": round(_mb("VmHWM")),
                      "phases_peak_mb": phases, "planned_mb": _planned(work, kind)}))  # fmt: skip


def _planned(work: Path, kind: str) -> dict:
    from sweep.config.space import load_space
    from sweep.planning.worker_memory import unit_needs

    need = unit_needs(load_space(work / "space.yaml"))[kind]
    parts = ("donors", "images", "halves", "indices", "working", "runtime")
    return {"mb": round(need.bytes / 2**20), **{p: round(getattr(need, p) / 2**20) for p in parts}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True, help="a folder worker_memory_run.py --work prepared")
    parser.add_argument("--kinds", nargs="+", default=["donor", "reptest"], choices=sorted(TRACED))
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(Path(args.work), args.child)
        return
    for kind in args.kinds:
        print(in_fresh_process(__file__, "--child", kind, "--work", args.work), flush=True)


if __name__ == "__main__":
    main()
