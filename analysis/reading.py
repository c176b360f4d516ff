"""Read a results directory into pandas with the explicit schemas of `sweep.store.schema`.

Every part is cast to the known schema (columns a part lacks come back as nulls); columns a part has beyond
the schema are kept too, so nothing written is dropped silently. Temporary files (".tmp-*") are ignored.
`results` is a local folder or a pyarrow.fs URI (`s3://bucket/prefix/<sweep>`; see `sweep.store.storage`).
A part that cannot be read (truncated, not Parquet, not one of ours, types that do not cast) is skipped with a
warning naming its path, and listed in `load(...)["problems"]`: it never crashes a reader.
"""

from __future__ import annotations

import json
import os
import posixpath
import warnings
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from sweep.store.compact import keep_winners
from sweep.store.layout import (
    CURRENT_FILE,
    CURVES_DIR,
    DONORS_DIR,
    KEPT_SUFFIX,
    REPTESTS_DIR,
    SIMILARITY_DIR,
    SNAPSHOT_DIR,
    STALE_DIR,
    TRIALS_DIR,
    key_column,
    tables,
)
from sweep.store.schema import schema
from sweep.store.storage import Loc, open_root

READ_THREADS = 16


def _parts(directory: Loc) -> list[Loc]:
    return directory.files(".parquet")


def _read_part(part: Loc, kind: str, expected: pa.Schema) -> pa.Table:
    t = part.read_parquet()
    if t.schema.equals(expected):  # written by this version: nothing to add or cast
        return t
    key = key_column(kind)
    if key not in t.column_names:
        raise ValueError(f"not a stitchsweep {kind} part: it has no {key!r} column")
    return _to_schema(t, expected)


def _to_schema(t: pa.Table, expected: pa.Schema) -> pa.Table:
    """The schema's columns first, in its order and types (null where `t` predates a column: a part or a
    snapshot written by an earlier release); columns beyond it kept after them."""
    names = set(t.column_names)
    for field in expected:
        if field.name not in names:
            t = t.append_column(field, pa.nulls(len(t), field.type))
    known = [f.name for f in expected]
    extra = [c for c in t.column_names if c not in known]
    return t.select(known + extra).cast(pa.schema(list(expected) + [t.schema.field(c) for c in extra]))


PART = "_part"  # the name of the part a row came from (a compacted file keeps it for each row)
FILE = "_file"  # the file a row was read from: the part itself, or a compacted file holding it
SNAPSHOT_SUFFIX = ".snapshot"  # Parquet inside, named so that a `**/*.parquet` glob does not count it again


def _snapshot(root: Loc, kind: str, stamps: dict[str, tuple[int, int]], expected: pa.Schema) -> tuple:
    """(the snapshot's rows of the files whose listing is unchanged since it was taken, those files' paths);
    nothing when there is no usable snapshot."""
    folder = root / kind
    try:
        snap = (root / SNAPSHOT_DIR / f"{kind}{SNAPSHOT_SUFFIX}").read_parquet()
        taken = json.loads((root / SNAPSHOT_DIR / f"{kind}.json").read_text())
    except (OSError, ValueError, pa.ArrowException):
        return None, set()
    if FILE not in snap.column_names:
        return None, set()
    same = {p for p, st in stamps.items() if list(taken.get(posixpath.basename(p), [])) == list(st)}
    names = pa.array(sorted(posixpath.basename(p) for p in same), pa.string())
    keep = snap.filter(pa.compute.is_in(snap[FILE], value_set=names))
    rows = _to_schema(keep, expected) if keep.num_rows else None  # `_part`, `_file` stay after the schema's
    return rows, {str(folder / posixpath.basename(p)) for p in same}


def write_snapshot(results: str | os.PathLike | Loc) -> int:
    """Take a snapshot of every table (after a run): one file per table holding every part's rows (Parquet,
    named `<table>.snapshot`), and each file's listed size and time. Later reads take the unchanged files' rows
    from it: on an object store a few requests instead of one per part. Returns how many files it covers."""
    root = open_root(results)
    covered = 0
    for kind in tables():
        stamps = (root / kind).file_stamps(".parquet")
        (root / SNAPSHOT_DIR / f"{kind}.parquet").unlink(missing_ok=True)  # an earlier release's name
        if not stamps:
            continue
        table = _gather(root, kind)  # every copy of a part: which one wins depends on what is listed later
        (root / SNAPSHOT_DIR / f"{kind}{SNAPSHOT_SUFFIX}").write_parquet(table)
        (root / SNAPSHOT_DIR / f"{kind}.json").write_text(
            json.dumps({posixpath.basename(p): list(st) for p, st in stamps.items()})
        )
        covered += len(stamps)
    return covered


def _gather(root: Loc, kind: str, problems: list[dict] | None = None) -> pa.Table | None:
    """Every row of every file of `kind`, loose parts and compacted files, each with its `_part` and `_file`
    (None when there is none): a part may appear twice (a compaction interrupted before it removed it)."""
    expected = schema(kind)  # with the columns of every index registered now
    stamps = (root / kind).file_stamps(".parquet")
    snapped, covered = _snapshot(root, kind, stamps, expected)
    tables = [] if snapped is None else [snapped]
    parts = [p for p in _parts(root / kind) if str(p) not in covered]

    def attempt(part: Loc) -> pa.Table | Exception:
        try:
            return _read_part(part, kind, expected)
        except Exception as exc:  # reported below, in the parts' order
            return exc

    # One part per unit: many small files, and on an object store each read is a round trip. Read them
    # concurrently (pyarrow releases the GIL while it reads).
    with ThreadPoolExecutor(max_workers=READ_THREADS) as pool:
        results_ = list(pool.map(attempt, parts))
    for part, got in zip(parts, results_):
        if isinstance(got, Exception):
            error = f"{type(got).__name__}: {got}"
            warnings.warn(f"skipping unreadable results part {part}: {error}", stacklevel=3)
            if problems is not None:
                problems.append({"path": str(part), "kind": kind, "error": error})
            continue
        if PART not in got.column_names:  # a loose part: its own name
            got = got.append_column(PART, pa.array([part.name] * got.num_rows, pa.string()))
        tables.append(got.append_column(FILE, pa.array([part.name] * got.num_rows, pa.string())))
    if not tables:
        return None
    merged = pa.concat_tables(tables, promote_options="permissive")
    return _to_schema(merged, expected)


def _current(root: Loc, kind: str) -> set[str] | None:
    """The part names of `kind`'s table that the sweep's current space names (`RESULTS/current.json`, written by
    every run); None where no run recorded them (every part is read)."""
    try:
        return set(json.loads((root / CURRENT_FILE).read_text())[kind])
    except (OSError, ValueError, KeyError):
        return None


def _stale(root: Loc, kind: str, expected: pa.Schema, problems: list[dict] | None) -> list[pa.Table]:
    """The rows of the parts `RESULTS/_stale/<kind>/` keeps (units the space no longer names), each part's rows
    with its `_part` and `_file`."""
    out = []
    for f in (root / STALE_DIR / kind).files(KEPT_SUFFIX):
        try:
            t = _read_part(f, kind, expected)
        except Exception as exc:
            if problems is not None:
                problems.append({"path": str(f), "kind": kind, "error": f"{type(exc).__name__}: {exc}"})
            continue
        name = pa.array([f.name[: -len(KEPT_SUFFIX)]] * t.num_rows, pa.string())
        out.append(t.append_column(PART, name).append_column(FILE, pa.array([f.name] * t.num_rows, pa.string())))
    return out


def read_table(
    results: str | os.PathLike | Loc,
    kind: str,
    problems: list[dict] | None = None,
    with_parts: bool = False,
    stale: bool = False,
) -> pa.Table:
    """All parts of `kind` ("trials", "donors" or "curves") as one Arrow table with a unified schema, in the
    parts' name order (`with_parts`: a `_part` column names each row's part, and `_file` the file it was read
    from). Parts compacted into one file (`sweep.store.compact`) are read like loose ones; a part recorded
    twice (a loose copy and a compacted one, or two compacted ones) counts once: the loose copy, else the
    newest compacted one. The rows of files unchanged since the last snapshot come from it (`write_snapshot`).
    Unreadable files are skipped with a warning and appended to `problems` as {path, kind, error}.

    Only the rows of the units the sweep's space names are read (`RESULTS/current.json`: the parts of units
    an edited plugin or a shrunk space left behind are stale); `stale=True` adds the stale ones too (those a
    run moved to `RESULTS/_stale/` and any the tables still hold), with a boolean column `stale`."""
    expected, root = schema(kind), open_root(results)
    merged = _gather(root, kind, problems)
    if merged is not None:
        merged = keep_winners(merged, FILE)
    current = _current(root, kind)
    kept = _stale(root, kind, expected, problems) if stale else []
    if merged is not None and current is not None:
        is_current = pa.compute.is_in(merged[PART], value_set=pa.array(sorted(current), pa.string()))
        kept += [merged.filter(pa.compute.invert(is_current))] if stale else []
        merged = merged.filter(is_current)
    if stale:
        flags = [pa.array([False] * (0 if merged is None else merged.num_rows), pa.bool_())] + [
            pa.array([True] * t.num_rows, pa.bool_()) for t in kept
        ]
        parts = ([] if merged is None else [merged]) + [_to_schema(t, expected) for t in kept]
        merged = pa.concat_tables(parts, promote_options="permissive") if parts else None
        merged = merged.append_column("stale", pa.concat_arrays(flags)) if merged is not None else None
    if merged is None:
        empty = expected.empty_table()
        names = pa.array([], pa.string())
        return empty.append_column(PART, names).append_column(FILE, names) if with_parts else empty
    merged = merged.sort_by(PART)
    return merged if with_parts else merged.drop_columns([PART, FILE])


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


def load(results: str | os.PathLike | Loc, stale: bool = False) -> dict[str, pd.DataFrame]:
    """Every table of a results directory (`tables()`: each registered kind's, then curves, donor_curves and
    energies), plus "problems": the parts that could not be read (path, kind, error), empty when every part is
    fine. Each table holds the units of the sweep's current space; `stale=True` adds those of units it no
    longer names (an edited plugin's earlier version, a shrunk space), marked by a boolean column `stale`."""
    problems: list[dict] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reported through "problems" instead
        read = {name: read_table(results, name, problems, stale=stale).to_pandas() for name in tables()}
    read["donors"] = _latest_donors(read["donors"])
    return {**read, "problems": pd.DataFrame(problems, columns=["path", "kind", "error"])}
