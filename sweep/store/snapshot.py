"""The readers' snapshot of a sweep's tables (`RESULTS/_snapshot/`): after a run, one Parquet file per table
holding every part's rows (`<table>.snapshot`), and each file's listed size and time (`<table>.json`). A later
read takes the rows of the files whose listing is unchanged from it: on an object store a few requests instead
of one per part. Here too: gathering a table's files (parts and compacted files, the snapshot's rows where it
still holds), each row with the part and the file it came from, cast to the table's schema. The store writes
the snapshot (`stitchsweep run` calls `write_snapshot`); `analysis.reading` reads the tables through `gather`.
No pandas, no PyTorch."""

from __future__ import annotations

import json
import os
import posixpath
import warnings
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc

from sweep.store.layout import SNAPSHOT_DIR, key_column, tables
from sweep.store.schema import schema
from sweep.store.storage import Loc, open_root

READ_THREADS = 16
PART = "_part"  # the name of the part a row came from (a compacted file keeps it for each row)
FILE = "_file"  # the file a row was read from: the part itself, or a compacted file holding it
SNAPSHOT_SUFFIX = ".snapshot"  # Parquet inside, named so that a `**/*.parquet` glob does not count it again


def read_part(part: Loc, kind: str, expected: pa.Schema) -> pa.Table:
    """One part (or compacted file) of table `kind`, cast to `expected`; a ValueError for a file that is not one
    of ours (no key column)."""
    t = part.read_parquet()
    if t.schema.equals(expected):  # written by this version: nothing to add or cast
        return t
    key = key_column(kind)
    if key not in t.column_names:
        raise ValueError(f"not a stitchsweep {kind} part: it has no {key!r} column")
    return to_schema(t, expected)


def to_schema(t: pa.Table, expected: pa.Schema) -> pa.Table:
    """The schema's columns first, in its order and types (null where `t` predates a column: a part or a
    snapshot written by an earlier release); columns beyond it kept after them."""
    names = set(t.column_names)
    for field in expected:
        if field.name not in names:
            t = t.append_column(field, pa.nulls(len(t), field.type))
    known = [f.name for f in expected]
    extra = [c for c in t.column_names if c not in known]
    return t.select(known + extra).cast(pa.schema(list(expected) + [t.schema.field(c) for c in extra]))


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
    keep = snap.filter(pc.is_in(snap[FILE], value_set=names))
    rows = to_schema(keep, expected) if keep.num_rows else None  # `_part`, `_file` stay after the schema's
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
        table = gather(root, kind)  # every copy of a part: which one wins depends on what is listed later
        (root / SNAPSHOT_DIR / f"{kind}{SNAPSHOT_SUFFIX}").write_parquet(table)
        (root / SNAPSHOT_DIR / f"{kind}.json").write_text(
            json.dumps({posixpath.basename(p): list(st) for p, st in stamps.items()})
        )
        covered += len(stamps)
    return covered


def gather(root: Loc, kind: str, problems: list[dict] | None = None) -> pa.Table | None:
    """Every row of every file of `kind`, loose parts and compacted files, each with its `_part` and `_file`
    (None when there is none): a part may appear twice (a compaction interrupted before it removed it). The
    rows of files unchanged since the last snapshot come from it. An unreadable file is skipped with a warning
    and appended to `problems` as {path, kind, error}."""
    expected = schema(kind)  # with the columns of every index registered now
    stamps = (root / kind).file_stamps(".parquet")
    snapped, covered = _snapshot(root, kind, stamps, expected)
    found = [] if snapped is None else [snapped]
    parts = [p for p in (root / kind).files(".parquet") if str(p) not in covered]

    def attempt(part: Loc) -> pa.Table | Exception:
        try:
            return read_part(part, kind, expected)
        except Exception as exc:  # reported below, in the parts' order
            return exc

    # One part per unit: many small files, and on an object store each read is a round trip. Read them
    # concurrently (pyarrow releases the GIL while it reads).
    with ThreadPoolExecutor(max_workers=READ_THREADS) as pool:
        read = list(pool.map(attempt, parts))
    for part, got in zip(parts, read):
        if isinstance(got, Exception):
            error = f"{type(got).__name__}: {got}"
            warnings.warn(f"skipping unreadable results part {part}: {error}", stacklevel=3)
            if problems is not None:
                problems.append({"path": str(part), "kind": kind, "error": error})
            continue
        if PART not in got.column_names:  # a loose part: its own name
            got = got.append_column(PART, pa.array([part.name] * got.num_rows, pa.string()))
        found.append(got.append_column(FILE, pa.array([part.name] * got.num_rows, pa.string())))
    if not found:
        return None
    merged = pa.concat_tables(found, promote_options="permissive")
    return to_schema(merged, expected)
