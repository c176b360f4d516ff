"""What the tables of the kinds of work share, for a kind's own schema (`unit_schema`: one part per unit, the
columns every unit records first and last, its own between them, each with its description), and the donors'
training curves and the trials' energies, tables of the store's own. `schema.py` collects the tables."""

from __future__ import annotations

import pyarrow as pa

# Columns every unit of a measuring kind records first, and last.
UNIT_HEAD = [
    ("unit_id", pa.string()),
    ("sweep", pa.string()),
    ("name", pa.string()),
    ("status", pa.string()),
    ("error", pa.string()),
    ("dataset", pa.string()),
]
UNIT_TAIL = [
    ("seed", pa.int64()),
    ("time_unit_s", pa.float64()),
    ("device", pa.string()),
    ("stitchsweep_version", pa.string()),
    ("schema_version", pa.int32()),
    ("finished_at", pa.timestamp("us", tz="UTC")),
]
MINIBATCH = [("images", pa.int32()), ("batch_size", pa.int32()), ("passes", pa.int32())]
ATTACK = [
    ("attack_norm", pa.string()),
    ("attack_eps", pa.float64()),
    ("attack_steps", pa.int32()),
    ("attack_step_size", pa.float64()),
]


def described(columns: list[tuple], descriptions: dict[str, str] | None = None) -> pa.Schema:
    """A schema of (name, type) `columns`, each field carrying its description (`descriptions[name]`) in its
    metadata where one is given (else `sweep.store.columns`' or the index catalogue's)."""
    descriptions = descriptions or {}
    return pa.schema(
        [pa.field(n, t, metadata={"description": descriptions[n]} if n in descriptions else None) for n, t in columns]
    )


def unit_schema(columns: list[tuple], descriptions: dict[str, str] | None = None) -> pa.Schema:
    """The table of a kind whose units write one part each: `UNIT_HEAD`, the kind's own `columns`, `UNIT_TAIL`."""
    return described(UNIT_HEAD + list(columns) + UNIT_TAIL, descriptions)


# A trained donor's curves, one part per donor: per epoch its training loss and its validation loss and
# accuracy, benign and (adversarial methods) on the method's own attack: `val_adv_loss`, `val_adv_acc`.
DONOR_CURVES_SCHEMA = pa.schema(
    [
        ("donor", pa.string()),
        ("donor_key", pa.string()),
        ("training", pa.string()),
        ("epoch", pa.int32()),
        ("metric", pa.string()),
        ("value", pa.float64()),
    ]
)


# Per-sample OOD energies of a trial with `ood` (Balogh & Jelasity 2025 Fig. 1c): one part per trial, one row per
# image and kind: "target" g<=j(x), "stitched" T(f<=i(x)), "outlier" (the outlier set through g<=j).
ENERGIES_SCHEMA = pa.schema(
    [
        ("trial_id", pa.string()),
        ("sweep", pa.string()),
        ("kind", pa.string()),
        ("energy", pa.float64()),
    ]
)
