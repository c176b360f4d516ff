"""Measure a cost profile for `stitchsweep plan --estimate` on this machine: per architecture and input
shape of the shipped search spaces (or those given), forward and training-step seconds per image, the
forward share up to each stitch point and the OOD detector's step and forward there
(`sweep.planning.calibration.calibrate`); the device's float64 algebra rates
(`sweep.planning.calibration.algebra`); plus the fixed cost of a unit on a warm worker (`--unit-s`, from
`tests/benchmarks/engine_overhead.py`). With
`--missing`, only what --out lacks is measured (new shapes, a shape's detector timings, the algebra rates). The
command's start-up and each stage's fixed cost (`tests/benchmarks/fixed_costs.py`) are measured too, or alone with
`--fixed` (the rest of --out kept).

    .venv/bin/python tests/benchmarks/calibrate.py --name cpu-2core --hardware "2-core CPU" \
        --out sweep/planning/profiles/cpu-2core.json
    .venv/bin/python tests/benchmarks/calibrate.py --device cuda --name h100 --hardware "NVIDIA H100" --out h100.json
    # add new shapes; the fixed costs alone:
    .venv/bin/python tests/benchmarks/calibrate.py --missing --out sweep/planning/profiles/cpu-2core.json
    .venv/bin/python tests/benchmarks/calibrate.py --fixed --out sweep/planning/profiles/cpu-2core.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def shapes_of(spaces: list[Path]) -> list[tuple[str, int, int]]:
    from sweep.config.space import load_space
    from sweep.registry import DATASETS

    found = set()
    for path in spaces:
        sweep = load_space(str(path))
        datasets = {sweep.data.dataset} | {d.data.dataset for d in sweep.donors.values()}
        for d in sweep.donors.values():
            if d.noise_sigma is not None:
                continue
            own = DATASETS[d.data.dataset]
            for ds in datasets:  # cross-task trials run a donor on another dataset's images
                info = DATASETS[ds]
                if info.channels == own.channels:
                    found.add((d.arch, info.channels, info.image_size))
    return sorted(found)


def fixed(args) -> dict:
    """The command's start-up and a stage's fixed cost, measured in fresh processes (`fixed_costs.py`)."""
    from fixed_costs import measure

    costs = measure(args.fixed_rounds, args.threads)
    print(f"fixed costs: start-up {costs['startup_s']} s, per stage {costs['stage_s']} s", flush=True)
    return costs


def write_fixed(out: Path, args) -> None:
    """`--fixed`: the fixed costs into an existing profile, its other timings kept."""
    profile = json.loads(out.read_text())
    profile.update(threads=args.threads, **fixed(args))
    words = " ".join(sys.argv[1:]).replace(str(REPO) + "/", "")
    profile["command"] = f"{profile['command']}; then PYTHONPATH=. python tests/benchmarks/calibrate.py {words}"
    profile["fixed_measured"] = datetime.date.today().isoformat()
    profile["fixed_load_average"] = [round(x, 1) for x in os.getloadavg()]  # a busy machine inflates them
    out.write_text(json.dumps(profile, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spaces", nargs="*", help="search spaces (default: every shipped one)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--name", default="cpu-2core")
    ap.add_argument("--hardware", default="2-core CPU (the project's development machine)")
    ap.add_argument(
        "--unit-s",
        type=float,
        default=0.05,
        help="fixed seconds per unit on a warm worker (default 0.05: Tune's 0.02 s per trial and a warm trial's"
        " setup, measured by tests/benchmarks/engine_overhead.py on the 2-core machine)",
    )
    ap.add_argument("--out", required=True)
    ap.add_argument("--missing", action="store_true", help="measure only what --out lacks; keep the rest")
    ap.add_argument("--fixed", action="store_true", help="measure only the fixed costs (fixed_costs.py); keep the rest")
    ap.add_argument("--fixed-rounds", type=int, default=3, help="fresh processes the fixed costs are the best of")
    ap.add_argument(
        "--detectors",
        default="small",
        help="the OOD detector kinds to time, comma-separated (small, paper; default small: `paper` is a ResNet-18 or"
        " ViT-Ti on each point's activations, slow to time on a CPU)",
    )
    args = ap.parse_args()

    import torch

    from sweep.costs.pricer import shape_key
    from sweep.planning.calibration import algebra, calibrate

    torch.set_num_threads(args.threads)
    if args.fixed:
        write_fixed(Path(args.out), args)
        return
    spaces = [Path(s) for s in args.spaces] or sorted((REPO / "search_spaces").glob("*.yaml"))
    shapes = shapes_of(spaces)
    t0 = time.perf_counter()
    archs, kept = {}, None
    if args.missing and Path(args.out).is_file():
        kept = json.loads(Path(args.out).read_text())
        archs = dict(kept["archs"])
        kinds = args.detectors.split(",")
        shapes = [s for s in shapes if any(k not in archs.get(shape_key(*s), {}).get("detector", {}) for k in kinds)]
    if kept is not None and not shapes and "algebra" in kept:
        print(f"{args.out} already has every shape and the algebra rates")
        return
    rates = kept["algebra"] if kept is not None and "algebra" in kept else algebra(args.device)
    print("float64 algebra: " + ", ".join(f"{k} {v:.3g}" for k, v in rates.items()), flush=True)
    # the command as run from the repository root, whatever the paths it was given (no machine's paths kept)
    words = [str(Path(w).resolve().relative_to(REPO)) if Path(w).exists() and Path(w).resolve().is_relative_to(REPO)
             else w for w in sys.argv]  # fmt: skip
    command = "PYTHONPATH=. python " + " ".join(words)
    profile = {
        "name": args.name,
        "hardware": args.hardware,
        "device": "cuda" if args.device.startswith("cuda") else "cpu",
        "measured": datetime.date.today().isoformat(),
        "command": command if kept is None else f"{kept['command']}; then {command}",
        "unit_s": args.unit_s,
        "threads": args.threads,
        **fixed(args),
        "algebra": rates,
        "archs": archs,
    }
    for shape in shapes:
        # a GPU is timed at batches it runs trials at (small ones leave it idle between kernels)
        gpu = args.device.startswith("cuda")
        batch = (
            (512 if gpu else 128) if shape[2] <= 64 else (128 if gpu else 16) if shape[2] <= 160 else (64 if gpu else 4)
        )
        key = shape_key(*shape)
        kinds = tuple(args.detectors.split(","))
        new = calibrate([shape], args.device, batch=batch, passes=key not in archs, detectors=kinds)
        if key in archs:  # a shape measured before: only its detector timings are added, its passes kept
            archs[key] = {**archs[key], "detector": {**archs[key].get("detector", {}), **new[key]["detector"]}}
        else:
            archs.update(new)
        print(f"{shape}: {archs[key]['forward_s'] * 1e3:.3f} ms/image forward", flush=True)
        profile["archs"] = dict(sorted(archs.items()))
        Path(args.out).write_text(json.dumps(profile, indent=1) + "\n")  # after every shape: a stop loses one
    Path(args.out).write_text(json.dumps(profile, indent=1) + "\n")
    print(f"{len(archs)} shapes in {time.perf_counter() - t0:.0f} s -> {args.out}")


if __name__ == "__main__":
    main()
