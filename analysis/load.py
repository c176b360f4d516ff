"""Read a results directory into pandas with the explicit schemas of `analysis.store.schema`.

Every part is cast to the known schema (columns a part lacks come back as nulls); columns a part has beyond
the schema are kept too, so nothing written is dropped silently. Temporary files (".tmp-*") are ignored.
`results` is a local folder or a pyarrow.fs URI (`s3://bucket/prefix/<sweep>`; see `analysis.store.storage`).
A part that cannot be read (truncated, not Parquet, not one of ours, types that do not cast) is skipped with a
warning naming its path, and listed in `load(...)["problems"]`: it never crashes a reader.
"""

from __future__ import annotations

import os
import warnings
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import pyarrow as pa

from .store.schema import (
    CURVES_DIR,
    DONOR_CURVES_DIR,
    DONORS_DIR,
    REPTESTS_DIR,
    SIMILARITY_DIR,
    TABLES,
    TRAINING_SIMILARITY_DIR,
    TRIALS_DIR,
    schema,
)
from .store.storage import Loc, open_root

READ_THREADS = 16
KEY_COLUMN = {
    TRIALS_DIR: "trial_id",
    DONORS_DIR: "donor",
    CURVES_DIR: "trial_id",
    REPTESTS_DIR: "unit_id",
    SIMILARITY_DIR: "unit_id",
    TRAINING_SIMILARITY_DIR: "unit_id",
    DONOR_CURVES_DIR: "donor_key",
}


def _parts(directory: Loc) -> list[Loc]:
    return directory.files(".parquet")


def _read_part(part: Loc, kind: str, expected: pa.Schema) -> pa.Table:
    t = part.read_parquet()
    if t.schema.equals(expected):  # written by this version: nothing to add or cast
        return t
    names = set(t.column_names)
    if KEY_COLUMN[kind] not in names:
        raise ValueError(f"not a stitchsweep {kind} part: it has no {KEY_COLUMN[kind]!r} column")
    for field in expected:  # add the columns this part predates
        if field.name not in names:
            t = t.append_column(field, pa.nulls(len(t), field.type))
    return _to_schema(t, expected)


def _to_schema(t: pa.Table, expected: pa.Schema) -> pa.Table:
    """The schema's columns first, in its order and types; columns beyond it kept after them."""
    known = [f.name for f in expected]
    extra = [c for c in t.column_names if c not in known]
    return t.select(known + extra).cast(pa.schema(list(expected) + [t.schema.field(c) for c in extra]))


def read_table(results: str | os.PathLike | Loc, kind: str, problems: list[dict] | None = None) -> pa.Table:
    """All parts of `kind` ("trials", "donors" or "curves") as one Arrow table with a unified schema.
    Unreadable parts are skipped with a warning and appended to `problems` as {path, kind, error}."""
    expected = schema(kind)  # with the columns of every index registered now
    tables = []
    parts = _parts(open_root(results) / kind)

    def attempt(part: Loc) -> pa.Table | Exception:
        try:
            return _read_part(part, kind, expected)
        except Exception as exc:  # reported below, in the parts' order
            return exc

    # One part per trial: many small files, and on an object store each read is a round trip. Read them
    # concurrently (pyarrow releases the GIL while it reads).
    with ThreadPoolExecutor(max_workers=READ_THREADS) as pool:
        results_ = list(pool.map(attempt, parts))
    for part, got in zip(parts, results_):
        if isinstance(got, Exception):
            error = f"{type(got).__name__}: {got}"
            warnings.warn(f"skipping unreadable results part {part}: {error}", stacklevel=2)
            if problems is not None:
                problems.append({"path": str(part), "kind": kind, "error": error})
        else:
            tables.append(got)
    if not tables:
        return expected.empty_table()
    return _to_schema(pa.concat_tables(tables, promote_options="permissive"), expected)


def load_trials(results: str | os.PathLike | Loc) -> pd.DataFrame:
    """One row per recorded trial (done and failed)."""
    return read_table(results, TRIALS_DIR).to_pandas()


def load_donors(results: str | os.PathLike | Loc) -> pd.DataFrame:
    """One row per donor and evaluation setting; the latest record of each when evaluated more than once."""
    return _latest_donors(read_table(results, DONORS_DIR).to_pandas())


def _latest_donors(df: pd.DataFrame) -> pd.DataFrame:
    if len(df):
        # rows written before `eval_id` existed are told apart by the settings they did record
        key = df["eval_id"].fillna(df["eps"].astype(str) + "/" + df["n_eval_robust"].astype(str))
        df = (
            df.assign(_key=key)
            .sort_values("finished_at")
            .drop_duplicates(["donor", "donor_key", "_key"], keep="last")
            .drop(columns="_key")
        )
    return df.reset_index(drop=True)


def load_curves(results: str | os.PathLike | Loc) -> pd.DataFrame:
    """Training curves in long format: trial_id, epoch, metric, value."""
    return read_table(results, CURVES_DIR).to_pandas()


def load_reptests(results: str | os.PathLike | Loc) -> pd.DataFrame:
    """Representation-test rows: one per unit and member (Balogh & Jelasity 2025 Section 5)."""
    return read_table(results, REPTESTS_DIR).to_pandas()


def load_similarity(results: str | os.PathLike | Loc) -> pd.DataFrame:
    """Similarity-unit rows (Cianfarani et al. 2022): one per unit and (A point, B point)."""
    return read_table(results, SIMILARITY_DIR).to_pandas()


def load(results: str | os.PathLike | Loc) -> dict[str, pd.DataFrame]:
    """Every table of a results directory ({"trials", "donors", "curves", "reptests", "similarity"}), plus
    "problems": the parts that could not be read (path, kind, error), empty when every part is fine."""
    problems: list[dict] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reported through "problems" instead
        tables = {name: read_table(results, name, problems).to_pandas() for name in TABLES}
    tables["donors"] = _latest_donors(tables["donors"])
    return {**tables, "problems": pd.DataFrame(problems, columns=["path", "kind", "error"])}
