"""What storing inverted images at a lower precision does to CKA: every similarity unit of a finished sweep that
reads inverted images, measured again (linear CKA, the full estimator, on the unit's points) on the same
inverted images stored as float32, float16 and uint8 (`sweep.store.inverted.encode` then `decode`), against
the float32 value. Non-robust networks' inversions are adversarial-like (small, structured perturbations of
the seed), which 8-bit rounding may disturb more than a robust network's.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/inverted_dtype.py --space search_spaces/jones_fmnist.yaml \\
        --storage /tmp/runs

Prints how far the float32 values computed here are from the sweep's recorded CKA (the same measure), then one
line per unit kind (the row donor plain or robust) and dtype: the largest and mean |CKA - CKA at float32| over
the units, and their count.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import analysis  # noqa: E402
from sweep.config.space import load_space  # noqa: E402
from sweep.kinds.similarity.run import full_matrix  # noqa: E402
from sweep.models.features import features  # noqa: E402
from sweep.store import inverted as stored  # noqa: E402
from sweep.store.results import SweepDir  # noqa: E402
from sweep.worker.splits import worker_splits  # noqa: E402
from sweep.worker.zoo import load_donor  # noqa: E402

CPU = torch.device("cpu")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--space", required=True)
    ap.add_argument("--storage", required=True)
    args = ap.parse_args()
    sweep = load_space(args.space)
    sweep_dir = SweepDir(args.storage, sweep.name)
    donors = {d.donor_key: d for d in sweep.donors.values()}
    units = [u for u in sweep.units.get("similarity", ()) if "inverted" in (u.a_inputs, u.b_inputs)]
    gaps: dict[tuple[str, str], list[float]] = defaultdict(list)
    models = {}
    recorded, agree = analysis.load_similarity(sweep_dir.path), []
    for u in units:
        splits = worker_splits(u.dataset, u.train_size, u.val_size, u.test_size, CPU)
        index = torch.from_numpy(stored.index(sweep_dir.path, u.inversion_id)["image"])
        natural = splits.test_x[index]
        inverted = stored.inverted(sweep_dir.path, u.inversion_id)
        for key in (u.a_key, u.b_key):
            models.setdefault(key, load_donor(sweep_dir, key, CPU).eval())
        values = {}
        for dtype in stored.DTYPES:
            images = torch.from_numpy(stored.decode(stored.encode(inverted, dtype)))
            inputs = {"benign": natural, "inverted": images}
            fa, fb = features(models[u.a_key], u.a_points), features(models[u.b_key], u.b_points)
            values[dtype] = full_matrix(fa, fb, inputs[u.a_inputs], inputs[u.b_inputs], CPU)[0].numpy()
        mine = recorded[recorded["unit_id"] == u.unit_id]  # the sweep's own value: the same measure?
        for r in mine.itertuples(index=False):
            agree.append(abs(float(values["float32"][int(r.a_index) - 1, int(r.b_index) - 1]) - float(r.cka)))
        kind = "plain" if (donors[u.a_key].eps or 0) == 0 else "robust"
        for dtype in ("float16", "uint8"):
            gaps[(kind, dtype)].append(float(np.abs(values[dtype] - values["float32"]).max()))
    print(f"{len(units)} similarity units on inverted images ({args.space})")
    print(f"  float32 here against the sweep's recorded CKA: |d| max {max(agree):.1e} over {len(agree)} values")
    for (kind, dtype), g in sorted(gaps.items()):
        print(f"  row donor {kind:6s} {dtype:8s} |dCKA| max {max(g):.2e}  mean {np.mean(g):.2e}  units {len(g)}")


if __name__ == "__main__":
    main()
