"""The training similarity kind's results table `training_similarity`: its columns and what they hold."""

from __future__ import annotations

import pyarrow as pa

from sweep.store.units import ATTACK, MINIBATCH, unit_schema

TABLE = "training_similarity"
DESCRIPTIONS = {
    "inputs": "'benign' or 'adversarial' (crafted against the donor's final epoch)",
    "point": "the stitch point or traced-graph node",
    "epoch_a": "the first epoch compared",
    "epoch_b": "the second epoch compared",
    "final_epoch": "the donor's last epoch",
}

# CKA across training epochs (Cianfarani et al. 2022 Figs 6, 25): one part per unit (a donor), one row per
# (point, epoch, epoch).
SCHEMA = unit_schema(
    [
        ("donor", pa.string()),
        ("donor_key", pa.string()),
        ("arch", pa.string()),
        ("inputs", pa.string()),  # "benign" | "adversarial" (crafted against the donor's final epoch)
        ("point", pa.string()),
        ("point_index", pa.int32()),
        ("epoch_a", pa.int32()),
        ("epoch_b", pa.int32()),
        ("final_epoch", pa.int32()),
        ("cka", pa.float64()),
    ]
    + MINIBATCH
    + ATTACK,
    DESCRIPTIONS,
)
