"""What storing the kept epochs' weights in float16 (`keep_dtype: float16`) does to CKA across training epochs
(Cianfarani et al. 2022 Section 5, Figs 6 and 25): the same donors trained twice, identical but for the dtype
their kept epochs are stored in (the training itself is the same: the final weights are compared), and the
same `training_similarity` unit on each; the largest |CKA(float16) - CKA(float32)| over every point and pair
of epochs, and the bytes of the kept epochs.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/kept_dtype.py --storage /tmp/kept_dtype

The donors are cianfarani_fmnist.yaml's kind (a plain and a PGD `resnet_tiny` on Fashion-MNIST), shorter:
`--epochs` epochs on `--train` images, every epoch kept; CKA on 2,000 test images, batches of 500, 3 passes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import analysis  # noqa: E402
from sweep.config.space import parse_space  # noqa: E402
from sweep.kinds.base import RunContext, resolve  # noqa: E402
from sweep.registry import KINDS  # noqa: E402
from sweep.store.results import SweepDir  # noqa: E402


def space(epochs: int, train: int) -> dict:
    donors, entries = {}, []
    for training, extra in (("plain", {}), ("pgd", {"eps": 0.1, "steps": 5})):
        for dtype in ("float32", "float16"):
            name = f"{training}_{dtype}"
            donors[name] = {"arch": "resnet_tiny", "training": training, "epochs": epochs, "lr": 0.05, "seed": 0,
                            "checkpoint_every": 1, "keep_dtype": dtype, **extra}  # fmt: skip
            entries.append({"name": name, "donors": [f"zoo:{name}"], "points": "stitch", "images": 2000,
                            "batch_size": 500, "passes": 3})  # fmt: skip
    return {
        "name": "kept_dtype",
        "data": {"dataset": "fashion_mnist", "train_size": train, "val_size": 500, "test_size": 2000},
        "donors": donors,
        "training_similarity": entries,
        "evaluation": {"eps": 0.1, "n_eval_robust": 0},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--storage", type=Path, default=Path("/tmp/kept_dtype"))
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--train", type=int, default=6000)
    args = ap.parse_args()
    sweep = parse_space(space(args.epochs, args.train))
    sweep_dir = SweepDir(args.storage, sweep.name)
    sweep_dir.create()
    ctx = RunContext(sweep_dir, torch.device("cpu"))
    for name in ("donor", "training_similarity"):
        kind = KINDS.get_entry(name)
        for unit in kind.units(sweep).values():
            out = resolve(kind.run)(unit, ctx)
            if out["status"] not in ("done", "skipped"):
                raise SystemExit(f"{name}: {out.get('error')}")
    rows = analysis.load(sweep_dir.path)["training_similarity"]
    for training in ("plain", "pgd"):
        a, b = (sweep.donors[f"{training}_{d}"] for d in ("float32", "float16"))
        finals = [torch.load(sweep_dir.zoo(d.donor_key) / "model.pt")["state_dict"] for d in (a, b)]
        same = all(torch.equal(finals[0][k], finals[1][k]) for k in finals[0])
        epochs = [args.storage / "zoo" / d.donor_key / "epochs" for d in (a, b)]  # the zoo beside the sweep
        kept = [sum(f.stat().st_size for f in folder.glob("*.pt")) for folder in epochs]
        keys = ["point", "epoch_a", "epoch_b"]
        r32, r16 = (rows[rows["donor_key"] == d.donor_key].set_index(keys)["cka"].sort_index() for d in (a, b))
        diff = (r32 - r16).abs()
        print(
            f"{training}: final weights identical {same}; kept epochs {kept[0] / 1e6:.2f} MB float32, "
            f"{kept[1] / 1e6:.2f} MB float16; |dCKA| max {diff.max():.2e} mean {diff.mean():.2e}"
            f" over {len(diff)} values"
        )


if __name__ == "__main__":
    main()
