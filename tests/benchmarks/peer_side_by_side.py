"""Side by side: Balogh & Jelasity 2025's reference code (github.com/szegedai/stitching-ood) against
`stitchsweep run` on the same work, whole processes timed, interleaved peer / ours in each round.

Items (one ResNet-18 donor trained for 1 epoch on 4,000 Fashion-MNIST images, self-stitched; DM with K = 100
training images; clean accuracy on the first 1,000 test images, no attack):

  1. DM at layer2.1 -> layer2.1, 0 epochs. Peer: `exec_stitch.py M M resnet18 resnet18 layer2.1 layer2.1
     rc2c_pre -gpu -1 -d fashion -e 0 -b 256 -i pinv -pinv-samples 100 --mod-only-stitch`; ours: `dm`.
  2. DM init + 1 TLM epoch (Adam, lr 1e-3, wd 1e-5, batch 256) at layer1.1 -> layer2.0. Peer: the same with
     `-e 1`; ours: `dm+tlm`, `epochs: 1`.
  3. A layer sweep of 16 DM configurations (0 epochs), front {layer1.1, layer2.1, layer3.1, layer4.1} x end
     the same four (cross-layer maps resized bilinearly to the end's size): the peer runs one process per
     configuration (the sum of their wall times); ours is one `stitchsweep run` of a space with 16 trials.

Targets: ours at most 0.5x the peer's wall time for items 1 and 2, at most 0.25x for item 3.

Data: the peer reads `PEER/data/pytorch/FashionMNIST/raw` (torchvision's FashionMNIST); ours reads the same
folder (`STITCHSWEEP_DATA=PEER/data/pytorch`). `--fmnist DIR` (the IDX files, gzipped or not, e.g. Debian's
dataset-fashion-mnist) writes there the first 4,000 training and first 1,000 test images when missing. Both
donors and both sides' stitchers train on all 4,000 images (`val_size: 0`).

Untimed preparation: the peer's donor (`exec_train.py resnet18 -gpu -1 -d fashion -e 1 -b 128`, kept under
STORAGE/peer_donor), ours (trained in STORAGE's zoo) and one run of each of our spaces; each timed run of
ours first removes the sweep's trial parts, so only the stitching stage reruns (as engine_overhead.py).

`--first-command`: each timed run of ours also removes the donor's evaluation (its donors-table rows and the
test predictions kept in the zoo), so it times a new user's first command after the donor's training: the
donor stage evaluates the donor (and fills the frozen halves the trials read: `sweep/worker/feed.py`), then
the trials run. `--old-root DIR`: a third side, another stitchsweep checkout (e.g. one from before the donor
stage fed the trials' halves) timed on the same sweeps the same way, interleaved with the other two.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/peer_side_by_side.py --peer PEER_CHECKOUT \\
        --peer-python PEER_VENV/bin/python --storage /tmp/bench_peer --fmnist /usr/share/datasets/fashion-mnist \\
        --rounds 2 --items 1,2,3
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TARGETS = {1: 0.5, 2: 0.5, 3: 0.25}
SWEEP_POINTS = ["layer1.1", "layer2.1", "layer3.1", "layer4.1"]
PEER_COMMON = ["resnet18", "resnet18"]
PEER_OPTIONS = ["rc2c_pre", "-gpu", "-1", "-d", "fashion", "-b", "256", "-i", "pinv", "-pinv-samples", "100"]
SUBSET = {"train-images-idx3-ubyte": 4000, "train-labels-idx1-ubyte": 4000}
SUBSET |= {"t10k-images-idx3-ubyte": 1000, "t10k-labels-idx1-ubyte": 1000}

SPACE = """\
name: peer_item{item}
data: {{dataset: fashion_mnist, train_size: 4000, val_size: 0, test_size: 1000}}
donors:
  d:
    arch: resnet18
    training: plain
    epochs: 1
    batch_size: 128
    optimizer: adam
    lr: 0.001
    weight_decay: 0.00001
    lr_schedule: constant
    augment: [crop, flip]
    seed: 0
    data: {{dataset: fashion_mnist, train_size: 4000, val_size: 0}}
stitching:
  - pairs: [{{front: zoo:d, end: zoo:d}}]
    stitch_points: {fronts}
    end_points: {ends}
    objectives: [{objective}]
    dm_samples: 100
{gradient}evaluation: {{n_eval_robust: 0}}
resources: {{cpus_per_trial: 2}}
"""
GRADIENT = """\
    epochs: 1
    lr: 0.001
    optimizer: adam
    weight_decay: 0.00001
    lr_schedule: constant
    batch_size: 256
    donor_bn: frozen
"""


def space_text(item: int) -> str:
    if item == 1:
        return SPACE.format(item=1, fronts="[layer2.1]", ends="[layer2.1]", objective="dm", gradient="")
    if item == 2:
        return SPACE.format(item=2, fronts="[layer1.1]", ends="[layer2.0]", objective="dm+tlm", gradient=GRADIENT)
    points = "[" + ", ".join(SWEEP_POINTS) + "]"
    return SPACE.format(item=3, fronts=points, ends=points, objective="dm", gradient="")


def peer_configs(item: int) -> list[tuple[str, str, int]]:
    """(front layer, end layer, epochs) of each peer process of an item."""
    if item == 1:
        return [("layer2.1", "layer2.1", 0)]
    if item == 2:
        return [("layer1.1", "layer2.0", 1)]
    return [(f, e, 0) for f in SWEEP_POINTS for e in SWEEP_POINTS]


def write_subset(source: Path, raw: Path) -> None:
    """The first 4,000 training and 1,000 test images (and labels) of the IDX files in `source`, uncompressed."""
    raw.mkdir(parents=True, exist_ok=True)
    for stem, n in SUBSET.items():
        gz = source / f"{stem}.gz"
        data = gzip.open(gz).read() if gz.exists() else (source / stem).read_bytes()
        ndim = data[3]
        dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
        per = 1
        for d in dims[1:]:
            per *= d
        header = data[:4] + b"".join(x.to_bytes(4, "big") for x in [n, *dims[1:]])
        (raw / stem).write_bytes(header + data[4 + 4 * ndim : 4 + 4 * ndim + n * per])


def timed(cmd: list[str], cwd: Path, env: dict) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return wall, out.stdout


def peer_donor(args, env: dict) -> Path:
    """The peer's donor, trained once (untimed) under STORAGE/peer_donor."""
    folder = args.storage / "peer_donor"
    model = folder / "model_1.pt"
    if not model.exists():
        cmd = [args.peer_python, "exec_train.py", "resnet18", "-gpu", "-1", "-d", "fashion", "-e", "1", "-b", "128"]
        wall, _ = timed([*cmd, "-dir", str(folder)], args.peer, env)
        print(f"peer donor trained (untimed): {wall:.1f} s", flush=True)
    return model


def run_peer(args, item: int, donor: Path, env: dict) -> tuple[float, list[float]]:
    """Wall time of the item's peer processes, one after the other, and each one's clean accuracy."""
    total, accs = 0.0, []
    for front, end, epochs in peer_configs(item):
        cmd = [args.peer_python, "exec_stitch.py", str(donor), str(donor), *PEER_COMMON, front, end]
        cmd += [*PEER_OPTIONS, "-e", str(epochs), "--mod-only-stitch"]
        wall, out = timed(cmd, args.peer, env)
        total += wall
        found = re.findall(r"Clean accuracy: ([\d.]+)%", out)
        accs.append(float(found[-1]) / 100 if found else float("nan"))
    return total, accs


def ours_cmd(args, space: Path) -> list[str]:
    return [sys.executable, "-m", "sweep", "run", str(space), "--storage", str(args.storage / "ours")] + [
        "--num-cpus",
        str(args.num_cpus),
    ]


def remove_trials(sweep_path: Path, donor_evaluation: bool = False) -> None:
    """Remove the sweep's trial parts (and with `donor_evaluation` the donors-table rows and the test
    predictions the donor stage keeps in the zoo: the donor's checkpoint stays)."""
    for sub in ("trials", "curves") + (("donors",) if donor_evaluation else ()):
        for part in (sweep_path / sub).glob("*.parquet"):
            part.unlink()
    if donor_evaluation:
        for kept in (sweep_path.parent / "zoo").glob("*/test-predictions-*.pt"):
            kept.unlink()


def read_trials(sweep_path: Path):
    import pandas as pd

    parts = sorted((sweep_path / "trials").glob("*.parquet"))
    trials = pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)
    bad = trials[trials["status"] != "done"]
    if len(bad):
        raise SystemExit(f"{sweep_path}: trials not done:\n{bad[['trial_id', 'status', 'error']]}")
    return trials


def run_ours(args, item: int, env: dict, root: Path | None = None) -> tuple[float, list[float], dict]:
    """Wall time of one `stitchsweep run` of the item's space by the checkout `root` (default: `--ours-root`;
    trial parts removed first, and with `--first-command` the donor's evaluation), each trial's clean accuracy
    and the sums of the trials' time_* columns."""
    root = root or args.ours_root
    space = args.storage / "spaces" / f"item{item}.yaml"
    sweep_path = args.storage / "ours" / f"peer_item{item}"
    remove_trials(sweep_path, args.first_command)
    # a cold node-local activation cache, as the peer has none: an earlier round's files would be read back
    with tempfile.TemporaryDirectory(prefix="peer_bench_cache_") as cache:
        wall, _ = timed(ours_cmd(args, space), root, dict(env, STITCHSWEEP_CACHE_DIR=cache, PYTHONPATH=str(root)))
    trials = read_trials(sweep_path).sort_values(["front_point", "end_point"], ignore_index=True)
    times = {c: float(trials[c].fillna(0).sum()) for c in trials.columns if c.startswith("time_")}
    return wall, [float(a) for a in trials["clean_acc"]], times


def prepare_ours(args, items: list[int], env: dict) -> None:
    """Write the spaces and run each once (trains our donor into the zoo the first time; untimed)."""
    (args.storage / "spaces").mkdir(parents=True, exist_ok=True)
    for item in items:
        space = args.storage / "spaces" / f"item{item}.yaml"
        space.write_text(space_text(item))
        wall, _ = timed(ours_cmd(args, space), args.ours_root, env)
        print(f"ours item {item}: first run (zoo, donor evaluation, trials; untimed) {wall:.1f} s", flush=True)


def envs(args) -> tuple[dict, dict]:
    data_root = args.peer / "data" / "pytorch"
    peer_env = dict(os.environ)
    peer_env.pop("PYTHONPATH", None)
    ours_env = dict(os.environ, STITCHSWEEP_DATA=str(data_root), PYTHONPATH=str(args.ours_root))
    return peer_env, ours_env


def check_inputs(args) -> None:
    if args.peer is None or args.peer_python is None or args.storage is None:
        raise SystemExit("--peer, --peer-python and --storage are required (see the module docstring)")
    if not (args.peer / "exec_stitch.py").exists():
        raise SystemExit(f"{args.peer}: not a checkout of szegedai/stitching-ood (no exec_stitch.py)")
    raw = args.peer / "data" / "pytorch" / "FashionMNIST" / "raw"
    if args.fmnist is not None and not all((raw / stem).exists() for stem in SUBSET):
        write_subset(args.fmnist, raw)
    missing = [stem for stem in SUBSET if not (raw / stem).exists()]
    if missing:
        raise SystemExit(f"{raw}: missing {missing}; pass --fmnist DIR to write the 4,000 / 1,000 subset")


def one_round(args, r: int, items: list[int], donor: Path, peer_env: dict, ours_env: dict, log: dict) -> None:
    print(f"round {r + 1}: load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    for item in items:
        sides = ["peer", "ours"] + (["old"] if args.old_root else [])
        sides = sides[r % len(sides) :] + sides[: r % len(sides)]  # each side first in turn
        for side in sides:
            if side == "peer":
                wall, accs = run_peer(args, item, donor, peer_env)
                times = {}
            else:
                wall, accs, times = run_ours(args, item, ours_env, args.old_root if side == "old" else None)
            log.setdefault((item, side), []).append(wall)
            shown = " ".join(f"{a:.3f}" for a in accs)
            print(f"round {r + 1} item {item} {side}: {wall:.1f} s; clean_acc {shown}", flush=True)
            if times:
                print("  ours, sums over trials: " + ", ".join(f"{k} {v:.1f}" for k, v in times.items()))


def report(items: list[int], log: dict) -> None:
    print(f"\n{'item':>4}  {'side':>4}  {'peer median s':>13}  {'median s':>9}  {'ratio':>6}  {'target':>6}")
    for item in items:
        peer = statistics.median(log[item, "peer"])
        for side in [s for s in ("ours", "old") if (item, s) in log]:
            ours = statistics.median(log[item, side])
            ratio = ours / peer
            verdict = "met" if ratio <= TARGETS[item] else "missed"
            print(f"{item:>4}  {side:>4}  {peer:>13.1f}  {ours:>9.1f}  {ratio:>6.2f}  {TARGETS[item]:>6.2f}  {verdict}")
    print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer", type=Path, default=None, help="a checkout of szegedai/stitching-ood")
    ap.add_argument("--peer-python", default=None, help="the Python of the peer's environment")
    ap.add_argument("--storage", type=Path, default=None, help="results root: donors, spaces, our sweeps")
    ap.add_argument("--fmnist", type=Path, default=None, help="Fashion-MNIST IDX files to cut the subset from")
    ap.add_argument("--ours-root", type=Path, default=REPO, help="the stitchsweep checkout to time (default: this)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--items", default="1,2,3", help="comma-separated: 1, 2, 3")
    ap.add_argument("--num-cpus", type=int, default=2, help="CPUs of our embedded Ray")
    ap.add_argument(
        "--first-command", action="store_true", help="time ours with the donor's evaluation too (a first command)"
    )
    ap.add_argument("--old-root", type=Path, default=None, help="another stitchsweep checkout, timed as 'old'")
    args = ap.parse_args()
    check_inputs(args)
    args.peer, args.storage = args.peer.resolve(), args.storage.resolve()
    args.old_root = args.old_root.resolve() if args.old_root else None
    args.storage.mkdir(parents=True, exist_ok=True)
    items = sorted({int(i) for i in args.items.split(",")})
    peer_env, ours_env = envs(args)
    donor = peer_donor(args, peer_env)
    prepare_ours(args, items, ours_env)
    log: dict = {}
    for r in range(args.rounds):
        one_round(args, r, items, donor, peer_env, ours_env, log)
    report(items, log)


if __name__ == "__main__":
    main()
