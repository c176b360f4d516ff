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
    TRIALS_DIR,
    table_kinds,
    tables,
)

SCHEMA_VERSION = 2  # 2: trial and donor identities changed (see docs: a results folder of version 1 reruns)
# Within version 2, SVCCA similarity units (`measure: svcca`) hash their protocol (`svcca_max_k`): their ids
# changed and their earlier parts rerun; every other unit's id is as before (docs/operations.md).

CURVE_SCHEMA = pa.schema(
    [
        ("trial_id", pa.string()),
        ("epoch", pa.int32()),
        ("metric", pa.string()),
        ("value", pa.float64()),
    ]
)

from sweep.store.units import DONOR_CURVES_SCHEMA, ENERGIES_SCHEMA  # noqa: E402

# The tables the store declares itself, beside those of the kinds of work (each kind's `table`, with its
# `Kind.schema`): the trials' training curves and energies, the donors' curves.
STORE_TABLES = {CURVES_DIR: CURVE_SCHEMA, DONOR_CURVES_DIR: DONOR_CURVES_SCHEMA, ENERGIES_DIR: ENERGIES_SCHEMA}


def index_columns(scope: str) -> list[tuple[str, pa.DataType]]:
    """The columns every index of the catalogue gives a table of `scope`: "trial" (its columns where it is
    measured in trials, with its permutation null's), "reptest" (its dissimilarity column)."""
    cols = []
    for e in INDEX_CATALOGUE.values():  # scope "similarity" only: none (its columns are the similarity table's)
        dtype = getattr(pa, e.dtype)()
        if scope == "reptest":
            cols += [(e.reptest_column, pa.float64())] if e.reptest_column else []
        elif e.in_trials:
            cols += [(c, dtype) for c in e.columns]
            if e.kind in ("similarity", "distance"):  # its permutation null, when the trial asked for one
                cols += [(f"{e.column}_null", pa.float64()), (f"{e.column}_p", pa.float64())]
    return cols


def with_indices(schema: pa.Schema, scope: str) -> pa.Schema:
    """`schema` and the columns of every index of scope "similarity" (`scope`) that it does not hold yet (an
    index a plugin registers), each under its `similarity_column`."""
    extra = [
        (e.similarity_column, getattr(pa, e.dtype)())
        for e in INDEX_CATALOGUE.values()
        if scope in e.scopes and e.similarity_column not in schema.names
    ]
    return pa.schema(list(schema) + extra)


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
    for e in INDEX_CATALOGUE.values():  # an index's column in the similarity table
        if "similarity" in e.scopes and table == "similarity" and column == e.similarity_column:
            return e.description or e.label
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
