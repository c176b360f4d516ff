"""`plan --estimate` against the measured wall time of `stitchsweep run` on four small study shapes, each in fresh
storage: the README's study (same-layer TLM + DM with per-point CKA and a CKA unit), a cross-layer sweep
(TLM from 3 front points to every end point), a similarity-only study (donors and a CKA matrix, no stitching)
and a user's study (`plugin`: a 4-point CNN and a similarity index of their own, registered by a plugin file
beside the space; three donors, cross-layer pairs, the index on every pair of donors; on scikit-learn's
digits, which need no download), whose network no profile knows: `plan` measures it here. Prints, per study,
the predicted and measured wall time, their ratio and the load average; and every `[sweep]` progress line's
ETA with its time and the time actually left to the last unit's end. Exits 1 when a study's measured /
predicted is outside 0.5-2, or when, after a quarter of its units finished, an ETA is off the time left by
more than 2x (both counted at least `SLACK_S`: the lines' one-second rounding and a unit's start and end
through Tune).

    PYTHONPATH=. .venv/bin/python tests/benchmarks/estimate_check.py [--only NAME] [--measured FILE] [--costs FILE]

`--measured FILE` keeps the measured times and ETA lines in FILE (JSON) and reuses those already there, so the
predictions can be recomputed after a change to the cost model without running the studies again. `--costs`
prices with another profile (on a busy machine: one measured in the same sitting, `calibrate.py SPACE --out
FILE`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = "data: {dataset: fashion_mnist, train_size: 6000, val_size: 1000, test_size: 1000}\n"
DONORS = """donors:
  net:
    vary: {seed: [0, 1]}
    name: "net_s{seed}"
    donor: {arch: resnet_tiny, epochs: 2, lr: 0.1, seed: "{seed}"}
"""
STUDIES = {
    "same_layer": None,  # the README's study, search_spaces/a_first_study.yaml, as shipped
    "cross_layer": "name: cross_layer\n"
    + DATA
    + DONORS
    + """stitching:
  pairs: [{front: zoo:net_s0, end: zoo:net_s1}]
  stitch_points: [layer1.0, layer2.0, layer3.0]
  end_points: all
  objectives: [tlm]
  epochs: 1
evaluation: {n_eval_robust: 0}
""",
    "similarity_only": "name: similarity_only\n"
    + DATA
    + DONORS
    + """similarity:
  - pairs: [{a: zoo:net_s0, b: zoo:net_s1}, {a: zoo:net_s0, b: zoo:net_s0}]
    points: stitch
evaluation: {n_eval_robust: 0}
""",
}


PLUGIN = '''"""A user's study code: a 4-point CNN and a similarity index of their own."""

import numpy as np
import torch
from torch import nn

from sweep.measures.indices import register_index
from sweep.models.base import Normalize, StagedNet, register_architecture
from sweep.store.catalogue import IndexEntry


def _conv(cin, cout, stride):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class _Head(nn.Module):
    def __init__(self, channels, num_classes):
        super().__init__()
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


@register_architecture("tiny_cnn", "a 4-point CNN of the user's")
def tiny_cnn(*, in_channels, num_classes, mean, std, image_size):
    stages = [
        ("conv1", nn.Sequential(Normalize(mean, std), *_conv(in_channels, 16, 1))),
        ("conv2", _conv(16, 32, 2)),
        ("conv3", _conv(32, 64, 2)),
        ("conv4", _conv(64, 64, 1)),
        ("head", _Head(64, num_classes)),
    ]
    return StagedNet(stages, ["conv1", "conv2", "conv3", "conv4"])


def norm_cosine(a, b) -> float:  # the cosine of the two sides' per-image norms
    na, nb = np.linalg.norm(np.asarray(a), axis=1), np.linalg.norm(np.asarray(b), axis=1)
    return float(na @ nb / (np.linalg.norm(na) * np.linalg.norm(nb)))


entry = IndexEntry("norm_cosine", ("norm_cosine",), "norm cosine", scopes=("similarity",))
register_index(entry, norm_cosine, "flatten")
'''
STUDIES["plugin"] = """name: plugin
plugins: [study_code.py]
data: {dataset: digits, train_size: null, val_size: 200, test_size: null}
donors:
  cnn:
    vary: {seed: [0, 1, 2]}
    name: "cnn_s{seed}"
    donor: {arch: tiny_cnn, epochs: 8, lr: 0.1, seed: "{seed}"}
stitching:
  pairs: [{front: zoo:cnn_s0, end: zoo:cnn_s1}, {front: zoo:cnn_s1, end: zoo:cnn_s2}]
  stitch_points: all
  end_points: all
  objectives: [tlm]
  epochs: 3
similarity:
  - pairs: [{a: zoo:cnn_s0, b: zoo:cnn_s1}, {a: zoo:cnn_s1, b: zoo:cnn_s2}, {a: zoo:cnn_s0, b: zoo:cnn_s2}]
    points: stitch
    measure: norm_cosine
evaluation: {n_eval_robust: 0}
"""
FILES = {"plugin": {"study_code.py": PLUGIN}}  # written beside the study's space
SLACK_S = 5.0  # an ETA and the time left are compared as at least this many seconds each
SUMMARY = re.compile(r"^\[sweep\] (\d+)/(\d+) finished.* elapsed, ETA (?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "sweep", *args], env=env, capture_output=True, text=True, cwd=REPO)


def predicted(space: str, costs: str | None = None):
    """The wall time `plan --estimate` predicts (`sweep.planning.wall.Wall`: its `total` in seconds, unrounded, where
    `plan` prints minutes from two minutes on) with the workers `run` would use here, and what it measured here
    (`Estimate.measured`)."""
    sys.path.insert(0, str(REPO))
    from sweep.config.space import load_space
    from sweep.planning.estimate import estimate, load_profile
    from sweep.planning.wall import default_workers, wall_time
    from sweep.registry import KINDS

    sweep, profile = load_space(space), load_profile(costs)
    plan = {k: list(u) for k, u in ((k, KINDS[k].units(sweep)) for k in KINDS) if u}
    est = estimate(sweep, plan, profile)
    workers = default_workers(sweep)
    return wall_time(est.seconds, est.units, profile, sweep, workers, est.uncalibrated, est.measuring_s), est.measured


def measured(space: str) -> dict:
    """`stitchsweep run` in fresh storage: its wall time, its `[sweep]` progress lines' ETAs (seconds since the
    start, units finished, units in all, ETA) and when its last unit ended (its last line with every unit
    finished)."""
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    etas, end, tail = [], None, []
    with tempfile.TemporaryDirectory() as storage:
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "sweep", "run", space, "--storage", storage]
        with subprocess.Popen(
            cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as run:
            for line in run.stdout:
                now, tail = time.perf_counter() - t0, (tail + [line])[-60:]
                m = SUMMARY.match(line.strip())
                if m:
                    done, total = int(m[1]), int(m[2])
                    hours, minutes, seconds = (int(x or 0) for x in m.groups()[2:])
                    etas.append([round(now, 1), done, total, hours * 3600 + minutes * 60 + seconds])
                    if done == total and end is None:
                        end = now
        wall = time.perf_counter() - t0
    if run.returncode:
        raise SystemExit(f"run {space} failed:\n{''.join(tail)}")
    return {"wall_s": wall, "load": os.getloadavg(), "etas": etas, "units_end_s": end}


def eta_check(kept: dict) -> tuple[list[str], bool]:
    """Each ETA line with the time left to the last unit's end and their ratio; whether every one after a
    quarter of the units finished is within 2x (both counted at least `SLACK_S`)."""
    lines, ok, end = [], True, kept.get("units_end_s")
    for t, done, total, eta in kept.get("etas", []):
        if end is None:
            break
        left = max(end - t, 0.0)
        a, b = max(eta, SLACK_S), max(left, SLACK_S)
        off = max(a, b) / min(a, b)
        judged = done >= total / 4
        bad = judged and off > 2.0
        ok = ok and not bad
        mark = "OFF" if bad else ("ok" if judged else "")
        lines.append(f"    {t:6.0f}s  {done:>3}/{total:<3} ETA {eta:5.0f}s  left {left:5.0f}s  {off:5.2f}x {mark}")
    return lines, ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=list(STUDIES), action="append")
    ap.add_argument("--costs", help="a profile to price with (default: the shipped cpu-2core)")
    ap.add_argument("--measured", type=Path, help="a JSON file of measured times: kept, and reused where present")
    args = ap.parse_args()
    kept = json.loads(args.measured.read_text()) if args.measured and args.measured.is_file() else {}
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only or list(STUDIES):
            space = study_space(name, Path(tmp))
            if name not in kept:
                kept[name] = measured(space)
                if args.measured:
                    args.measured.write_text(json.dumps(kept, indent=1))
            wall, load = kept[name]["wall_s"], kept[name]["load"]
            parts, measured_here = predicted(space, args.costs)
            guess = parts.total
            loads = ", ".join(f"{x:.1f}" for x in load)
            print(f"{'study':<16} {'predicted':>10} {'measured':>10} {'ratio':>6}  load average (1, 5, 15 min)")
            print(f"{name:<16} {guess:>9.0f}s {wall:>9.0f}s {wall / guess:>6.2f}  {loads}", flush=True)
            print(
                f"  predicted: start-up {parts.startup:.0f} s, measuring {parts.measuring:.0f} s, workers' start"
                f" {parts.stages:.0f} s, work {parts.work:.0f} s"
                + "".join(f"\n  {key} measured here: {how}" for key, how in measured_here.items())
            )
            lines, ok = eta_check(kept[name])
            print("  its ETA lines (time since the start, units finished, ETA, time left to the last unit's end):")
            print("\n".join(lines) or "    none", flush=True)
            if not 0.5 <= wall / guess <= 2.0:
                failed.append(f"{name}: measured / predicted {wall / guess:.2f}, outside 0.5-2")
            if not ok:
                failed.append(f"{name}: an ETA after a quarter of the units off the time left by more than 2x")
    if failed:
        raise SystemExit("estimate check failed: " + "; ".join(failed))


def study_space(name: str, folder: Path) -> str:
    """The study's space file (written into `folder` with its plugin files, but for the shipped README study)."""
    text = STUDIES[name]
    if text is None:
        return str(REPO / "search_spaces" / "a_first_study.yaml")
    for file, content in FILES.get(name, {}).items():
        (folder / file).write_text(content)
    space = folder / f"{name}.yaml"
    space.write_text(text)
    return str(space)


if __name__ == "__main__":
    main()
