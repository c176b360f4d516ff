"""The representation tests' results table `reptests`: its columns, each index's dissimilarity column between
its head and tail (`sweep.store.schema.index_columns`)."""

from __future__ import annotations

import pyarrow as pa

from sweep.store.schema import index_columns

TABLE = "reptests"
DESCRIPTIONS = {
    "donor": "member B's donor",
    "name": "the test's label in the search space",
}

# Representation tests (Balogh & Jelasity 2025 Section 5): one part per unit, one row per member B of its set S.
HEAD = [
    ("unit_id", pa.string()),
    ("sweep", pa.string()),
    ("name", pa.string()),
    ("test", pa.string()),  # "sensitivity" | "specificity"
    ("status", pa.string()),
    ("error", pa.string()),
    ("arch", pa.string()),
    ("dataset", pa.string()),
    ("donor", pa.string()),
    ("donor_key", pa.string()),
    ("layer", pa.string()),
    ("rank", pa.int32()),  # null: full rank
    ("probe_acc", pa.float64()),  # F(B): linear probing accuracy on the test sample
    ("reference", pa.bool_()),  # B is A = argmax F
    ("ref_donor", pa.string()),
    ("ref_layer", pa.string()),
    ("ref_rank", pa.int32()),
    ("probe_gap", pa.float64()),  # |F(A) - F(B)|
]
# ... then each index's dissimilarity column (catalogue.py), then:
TAIL = [
    ("d_dm_func", pa.float64()),  # 1 - relative accuracy of B stitched into A's network by DM
    ("dm_func_acc", pa.float64()),
    ("samples", pa.int32()),
    ("probe_train_size", pa.int32()),
    ("time_unit_s", pa.float64()),
    ("stitchsweep_version", pa.string()),
    ("schema_version", pa.int32()),
    ("finished_at", pa.timestamp("us", tz="UTC")),
]


def schema() -> pa.Schema:
    """The representation-test table without descriptions beyond its own."""
    return pa.schema([pa.field(n, t, metadata=_described(n)) for n, t in HEAD + index_columns("reptest") + TAIL])


def _described(name: str) -> dict | None:
    return {"description": DESCRIPTIONS[name]} if name in DESCRIPTIONS else None
