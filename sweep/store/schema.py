"""The Parquet schemas of a results directory: the one place both the engine and the readers take them from.

Columns are only ever added (never renamed or retyped); readers cast every part to these schemas, so a part
written before a column existed reads back with nulls there instead of losing the column. The columns of the
similarity indices are not written here: `schema(table)` takes them from the index catalogue (`catalogue.py`),
so a registered index has its columns without an edit to this file.
"""

from __future__ import annotations

import pyarrow as pa

from sweep.store.catalogue import INDEX_CATALOGUE
from sweep.store.columns import describe
from sweep.store.layout import (
    CURVES_DIR,
    DONOR_CURVES_DIR,
    ENERGIES_DIR,
    REPTESTS_DIR,
    TRIALS_DIR,
    table_kinds,
    tables,
)

SCHEMA_VERSION = 2  # 2: trial and donor identities changed (see docs: a results folder of version 1 reruns)
# Within version 2, SVCCA similarity units (`measure: svcca`) hash their protocol (`svcca_max_k`): their ids
# changed and their earlier parts rerun; every other unit's id is as before (docs/operations.md).

_TRIAL_HEAD = [
    ("trial_id", pa.string()),
    ("sweep", pa.string()),
    ("status", pa.string()),  # "done" | "failed"
    ("error", pa.string()),
    # configuration (the scientific fields of the TrialSpec)
    ("dataset", pa.string()),
    ("front", pa.string()),
    ("end", pa.string()),
    ("front_key", pa.string()),
    ("end_key", pa.string()),
    ("front_point", pa.string()),
    ("end_point", pa.string()),
    ("point_index", pa.int32()),
    ("n_points", pa.int32()),
    ("end_index", pa.int32()),  # the end point's position among the end model's stitch points
    ("n_end_points", pa.int32()),
    ("objective", pa.string()),
    ("alpha", pa.float64()),
    ("seed", pa.int64()),
    ("epochs", pa.int32()),
    ("lr", pa.float64()),
    ("batch_size", pa.int32()),
    ("dm_samples", pa.int32()),
    ("init", pa.string()),
    ("donor_bn", pa.string()),
    ("train_size", pa.int64()),
    ("val_size", pa.int64()),
    ("test_size", pa.int64()),
    ("split_id", pa.string()),
    ("attack", pa.string()),
    ("eps", pa.float64()),
    ("attack_iterations", pa.int32()),
    ("attack_restarts", pa.int32()),
    ("n_eval_robust", pa.int32()),
    ("precision", pa.string()),
    ("channels_last", pa.bool_()),
    ("beta", pa.float64()),  # trades
    ("adv_eps", pa.float64()),  # adversarial objectives: the PGD of the inner maximisation
    ("adv_step_size", pa.float64()),
    ("adv_steps", pa.int32()),
    ("adv_random_start", pa.bool_()),
    ("stitcher", pa.string()),  # "affine" | "bn_affine_bn"
    ("optimizer", pa.string()),  # the stitcher's optimiser (gradient objectives): "adam" | "sgd"
    ("weight_decay", pa.float64()),
    ("momentum", pa.float64()),  # sgd
    ("lr_schedule", pa.string()),  # "step" | "constant"
    ("indices", pa.string()),  # the similarity indices requested, "+"-joined
    ("similarity_samples", pa.int32()),
    ("pwcca_layout", pa.string()),  # how PWCCA / OPD saw the activations: "positions" | "pooled" | "flatten"
    ("opd_layout", pa.string()),
    ("ood_outliers", pa.string()),  # the OOD detector's outlier sets, "+"-joined
    ("ood_train_size", pa.int32()),
    ("ood_epochs", pa.int32()),
    ("ood_oe_epochs", pa.int32()),
    ("ood_samples", pa.int32()),
    ("ood_detector", pa.string()),  # null: the small detector; "paper": ResNet-18 / ViT-Ti blocks
    ("front_dataset", pa.string()),  # the donors' training data (differ in cross-task stitching)
    ("end_dataset", pa.string()),
    ("stitch_data", pa.string()),  # whose data trained and tests the stitcher: "sweep" | "front" | "end"
    # a noise sender (Smith & Marcu 2024): the stitcher trains and is tested on clustered noise
    ("noise_sigma", pa.float64()),
    ("noise_train_per_class", pa.int64()),
    ("noise_test_per_class", pa.int64()),
    ("noise_seed", pa.int64()),  # the samples' own seed (null: the trial's seed drew them)
    ("params", pa.string()),  # the objective's own parameters, a JSON object (null: it declares none)
    ("permutations", pa.int32()),  # the indices' permutation null: shuffles of the target's images (0: none)
    # metrics
    ("clean_acc", pa.float64()),
    ("robust_acc", pa.float64()),
    ("relative_acc", pa.float64()),  # clean_acc / the clean accuracy of the donor trained on `dataset`
    # the end network's own clean accuracy on this trial's test images (the receiver baseline of Smith & Marcu
    # 2024; measured with the receiver_rank index)
    ("receiver_acc", pa.float64()),
    ("most_frequent_class", pa.int32()),
    ("most_frequent_class_ratio", pa.float64()),
    ("num_classes", pa.int32()),  # of the test data: 1/num_classes is the ratio of an unbiased classifier
    ("final_train_loss", pa.float64()),
    ("dm_residual", pa.float64()),
    ("dm_condition", pa.float64()),  # of the DM fit's centred (standardised) source rows
    # agreement with the end network ("head") on the test images (Jones et al. 2022 4.5), by whether the front
    # network ("body") and the head agree on an image, and on the true label
    ("head_agreement", pa.float64()),
    ("agree_both_correct", pa.float64()),
    ("agree_both_wrong", pa.float64()),
    ("agree_disagree", pa.float64()),
    ("n_both_correct", pa.int64()),
    ("n_both_wrong", pa.int64()),
    ("n_disagree", pa.int64()),
]
# ... then the columns of every similarity index in the catalogue (`catalogue.py`), then:
_TRIAL_TAIL = [
    ("ood_auroc", pa.float64()),  # energy-detector AUROC, target vs stitched activations (0.5: in-distribution)
    ("front_clean_acc", pa.float64()),
    ("front_robust_acc", pa.float64()),
    ("end_clean_acc", pa.float64()),
    ("end_robust_acc", pa.float64()),
    # timings (seconds) and provenance
    ("time_setup_s", pa.float64()),
    ("time_fit_s", pa.float64()),
    ("time_eval_clean_s", pa.float64()),
    ("time_eval_robust_s", pa.float64()),
    ("time_similarity_s", pa.float64()),
    ("time_ood_s", pa.float64()),
    ("time_total_s", pa.float64()),
    ("device", pa.string()),
    ("hostname", pa.string()),
    ("torch_version", pa.string()),
    ("stitchsweep_version", pa.string()),
    ("schema_version", pa.int32()),
    ("finished_at", pa.timestamp("us", tz="UTC")),
]

DONOR_SCHEMA = pa.schema(
    [
        ("donor", pa.string()),  # the name in the search space, e.g. "plain_a"
        ("ref", pa.string()),  # "zoo:plain_a"
        ("donor_key", pa.string()),  # hash of the training config: names the cached checkpoint
        ("sweep", pa.string()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("arch", pa.string()),
        ("dataset", pa.string()),
        ("training", pa.string()),  # "plain" | "pgd" | "trades" | "file" | "robustbench"
        ("epochs", pa.int32()),
        ("beta", pa.float64()),  # trades
        ("adv_fraction", pa.float64()),  # pgd
        ("train_eps", pa.float64()),  # adversarial training: the budget, in its threat model's units
        ("train_size", pa.int64()),
        ("seed", pa.int64()),
        ("freeze", pa.string()),  # layer freezing: "point@epoch, ..." (null: none)
        ("clean_acc", pa.float64()),
        ("robust_acc", pa.float64()),
        ("n_eval_robust", pa.int32()),
        ("eps", pa.float64()),
        # the donor's own evaluation only: the same on its first training images (Cianfarani et al. 2022 Table 1)
        ("train_clean_acc", pa.float64()),
        ("train_robust_acc", pa.float64()),
        ("num_classes", pa.int32()),  # the donor's own evaluation: classes of its test data
        ("at_chance", pa.bool_()),  # ... and whether its accuracy there is no better than chance (analysis.donors)
        # the evaluation the accuracies come from: a donor has one row per evaluation the sweep uses (its own
        # test set, and each trial's test images and attack settings); a trial reads only an exact match
        ("eval_id", pa.string()),
        ("eval_dataset", pa.string()),
        ("test_size", pa.int64()),
        ("attack", pa.string()),
        ("attack_iterations", pa.int32()),
        ("attack_restarts", pa.int32()),
        ("trained_now", pa.bool_()),  # False when the checkpoint came from the cache
        ("time_train_s", pa.float64()),
        ("time_eval_s", pa.float64()),
        ("stitchsweep_version", pa.string()),
        ("schema_version", pa.int32()),
        ("finished_at", pa.timestamp("us", tz="UTC")),
    ]
)

# Representation tests (Balogh & Jelasity 2025 Section 5): one part per unit, one row per member B of its set S.
_REPTEST_HEAD = [
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
_REPTEST_TAIL = [
    ("d_dm_func", pa.float64()),  # 1 - relative accuracy of B stitched into A's network by DM
    ("dm_func_acc", pa.float64()),
    ("samples", pa.int32()),
    ("probe_train_size", pa.int32()),
    ("time_unit_s", pa.float64()),
    ("stitchsweep_version", pa.string()),
    ("schema_version", pa.int32()),
    ("finished_at", pa.timestamp("us", tz="UTC")),
]

CURVE_SCHEMA = pa.schema(
    [
        ("trial_id", pa.string()),
        ("epoch", pa.int32()),
        ("metric", pa.string()),
        ("value", pa.float64()),
    ]
)

from sweep.store.units import (  # noqa: E402  (the measuring kinds' tables)
    DONOR_CURVES_SCHEMA,
    ENERGIES_SCHEMA,
    SIMILARITY_SCHEMA,
)

# The tables the store declares itself, beside those of the kinds of work (each kind's `table`, with its
# `Kind.schema`): the trials' training curves and energies, the donors' curves.
STORE_TABLES = {CURVES_DIR: CURVE_SCHEMA, DONOR_CURVES_DIR: DONOR_CURVES_SCHEMA, ENERGIES_DIR: ENERGIES_SCHEMA}


def _index_columns(reptest: bool) -> list[tuple[str, pa.DataType]]:
    cols = []
    for e in INDEX_CATALOGUE.values():  # scope "similarity" only: none (its columns are the similarity table's)
        dtype = getattr(pa, e.dtype)()
        if reptest:
            cols += [(e.reptest_column, pa.float64())] if e.reptest_column else []
        elif e.in_trials:
            cols += [(c, dtype) for c in e.columns]
            if e.kind in ("similarity", "distance"):  # its permutation null, when the trial asked for one
                cols += [(f"{e.column}_null", pa.float64()), (f"{e.column}_p", pa.float64())]
    return cols


def schema(table: str) -> pa.Schema:
    """The Parquet schema of `table` (one of `tables()`), with the columns of every index registered in the
    catalogue now, each field carrying its description in its metadata: the one a kind's own schema gives the
    field, else `columns.py`'s."""
    bare = _bare_schema(table)
    return pa.schema([f.with_metadata({"description": _own(f) or _description(table, f.name)}) for f in bare])


def _own(field: pa.Field) -> str:
    return (field.metadata or {}).get(b"description", b"").decode()


def column_names(table: str) -> list[str]:
    """The column names of `table`'s schema (without building the descriptions `schema` attaches)."""
    return _bare_schema(table).names


def _description(table: str, column: str) -> str:
    for e in (e for e in INDEX_CATALOGUE.values() if e.in_trials or e.reptest_column):
        if e.kind in ("similarity", "distance") and column == f"{e.column}_null":
            side = "95th" if e.kind == "similarity" else "5th"
            return f"{e.label}: the {side} percentile of its permutation null (the target's images shuffled)"
        if e.kind in ("similarity", "distance") and column == f"{e.column}_p":
            return f"{e.label}: the permutation p-value, (1 + shuffles at least as extreme) / (1 + shuffles)"
        if column in e.columns or column == e.reptest_column:
            what = e.description or e.label
            return f"{what} (d(A, B) in representation tests)" if column == e.reptest_column else what
    return describe(table, column) or ""


def trials_schema() -> pa.Schema:
    """The trials table without descriptions: the trial kind's `Kind.schema`."""
    return pa.schema(_TRIAL_HEAD + _index_columns(reptest=False) + _TRIAL_TAIL)


def similarity_schema() -> pa.Schema:
    """The similarity table without descriptions: its own columns, and that of every index of scope
    "similarity" that it does not hold yet (an index a plugin registers)."""
    extra = [
        (e.similarity_column, getattr(pa, e.dtype)())
        for e in INDEX_CATALOGUE.values()
        if "similarity" in e.scopes and e.similarity_column not in SIMILARITY_SCHEMA.names
    ]
    return pa.schema(list(SIMILARITY_SCHEMA) + extra)


def reptests_schema() -> pa.Schema:
    """The representation-test table without descriptions: the reptest kind's `Kind.schema`."""
    return pa.schema(_REPTEST_HEAD + _index_columns(reptest=True) + _REPTEST_TAIL)


def _bare_schema(table: str) -> pa.Schema:
    if table in STORE_TABLES:
        return STORE_TABLES[table]
    from sweep.registry import resolve

    for kind in table_kinds():
        if kind.table == table:
            declared = resolve(kind.schema) if isinstance(kind.schema, str) else kind.schema
            return declared if isinstance(declared, pa.Schema) else declared()
    raise KeyError(f"unknown results table {table!r}; the tables are {list(tables())}")


def trial_schema() -> pa.Schema:
    return schema(TRIALS_DIR)


def reptest_schema() -> pa.Schema:
    return schema(REPTESTS_DIR)
