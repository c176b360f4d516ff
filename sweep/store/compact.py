"""Compaction of a table's parts: a finished stage's one-row-per-unit parts gathered into a few Parquet files,
so that a listing and a read of the table stay cheap on an object store, without losing exactly-once.

The rules (docs/results.md, "Compacted parts"):
- only parts whose every row is `done` are compacted (or those of a table without a `status` column: the
  store's own curves and energies, written only by units that finished); a failed part stays loose, so a rerun
  replaces it as before and `resume --failed` still removes it;
- a compacted file `<table>/@compacted-<ns>-<hex>.parquet` holds the parts' rows with a `_part` column naming
  the part each row came from (its file name); the name starts with a character no unit id or donor name can
  start with, and sorts by the time it was written;
- it is written whole (write, then rename; one upload on an object store) and read back (its checksum verified,
  its `_part` column the one written) before the loose parts it holds, and the older compacted files it
  replaces, are deleted: a crash in between leaves the same part twice, and a write that failed, or that landed
  but was answered as failed (a store's lost answer), deletes nothing;
- readers keep one copy of each part: a loose part wins over every compacted copy (it is newer: a part is
  only rewritten loose), and among compacted files the newest (last by name) wins.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc

from sweep.store.layout import PART_SUFFIX
from sweep.store.retry import StoreUnavailable
from sweep.store.storage import Loc, open_root

COMPACTED_PREFIX = "@compacted-"
PART_COLUMN = "_part"  # in a compacted file: the name of the part a row came from
MAX_FILES = 100  # compacted files per table: beyond it, they are merged into one


def is_compacted(loc: Loc) -> bool:
    """Whether `loc` is a compacted file (not one unit's part)."""
    return loc.name.startswith(COMPACTED_PREFIX)


def compacted_name() -> str:
    """A new compacted file's name: sorts after every earlier one (nanoseconds), unique across writers."""
    return f"{COMPACTED_PREFIX}{time.time_ns():020d}-{uuid.uuid4().hex[:8]}{PART_SUFFIX}"


def winners(pairs: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """The (file, part) pairs readers keep of `pairs` (every file a part's rows were read from): the loose
    part's own file when it exists, else the newest compacted file holding it."""
    best: dict[str, str] = {}
    for file, part in pairs:
        current = best.get(part)
        if current is None or file == part or (current != part and file > current):
            best[part] = file
    return {(f, p) for p, f in best.items()}


def keep_winners(table: pa.Table, file_column: str) -> pa.Table:
    """`table` (with `file_column` and `_part`) without the rows of superseded copies of a part."""
    if not table.num_rows:
        return table
    pairs = table.select([file_column, PART_COLUMN]).group_by([file_column, PART_COLUMN]).aggregate([])
    pairs = list(zip(pairs[file_column].to_pylist(), pairs[PART_COLUMN].to_pylist()))
    keep = winners(pairs)
    if len(keep) == len(pairs):
        return table
    joined = pc.binary_join_element_wise(table[file_column], table[PART_COLUMN], "\0")
    return table.filter(pc.is_in(joined, value_set=pa.array([f"{f}\0{p}" for f, p in keep], pa.string())))


def compacted_statuses(folder: Loc, names: list[str], unreadable: list | None = None) -> dict[str, str | None]:
    """Part name -> status ("done", or null where the table has no status) of every part the compacted files
    among `names` (a listing of `folder`) hold; the newest file's wins. An unreadable file holds nothing (its
    units are pending again) and is appended to `unreadable` (a run sets it aside, so they are recomputed)."""
    out: dict[str, str | None] = {}
    for name in sorted(n for n in names if n.startswith(COMPACTED_PREFIX)):
        try:
            t = _columns(folder / name, [PART_COLUMN, "status"])
        except StoreUnavailable:  # not known unreadable: setting it aside would compute its units again
            raise
        except Exception:  # truncated or not Parquet
            if unreadable is not None:
                unreadable.append(folder / name)
            continue
        status = t["status"].to_pylist() if "status" in t.column_names else [None] * t.num_rows
        out.update(zip(t[PART_COLUMN].to_pylist(), status))
    return out


def recorded_parts(folder: Loc) -> dict[str, Loc]:
    """Part name -> the file that holds it for readers, loose or compacted (`winners`): which units a table
    has recorded, whether or not its parts were compacted."""
    pairs = []
    for f in folder.files(PART_SUFFIX):
        try:
            held = _columns(f, [PART_COLUMN])[PART_COLUMN].to_pylist() if is_compacted(f) else [f.name]
        except StoreUnavailable:
            raise
        except Exception:  # unreadable: holds nothing
            continue
        pairs += [(f.name, p) for p in held]
    return {p: folder / f for f, p in sorted(winners(pairs), key=lambda fp: fp[1])}


def _columns(loc: Loc, wanted: list[str]) -> pa.Table:
    """Those of `wanted` that the Parquet file at `loc` has (only they are decoded; the whole file is read, and
    its checksum verified: `Loc.parquet_file`)."""
    pf = loc.parquet_file()
    return pf.read(columns=[c for c in wanted if c in pf.schema_arrow.names])


def _done_part(part: Loc) -> pa.Table | None:
    """A loose part's rows with their `_part`, when every row is done (or the table has no status)."""
    try:
        t = part.read_parquet()
    except Exception:  # unreadable: left loose, for `status` and `resume` to report and set aside
        return None
    if "status" in t.column_names and not all(s == "done" for s in t["status"].to_pylist()):
        return None
    return t.append_column(PART_COLUMN, pa.array([part.name] * t.num_rows, pa.string()))


SOURCE = "_source"  # while merging: the file a row was read from


def _sourced(t: pa.Table, source: str) -> pa.Table:
    return t.append_column(SOURCE, pa.array([source] * t.num_rows, pa.string()))


BATCH = 1000  # loose parts read at once: each is a small table with its own schema, and together they are
# what a compaction holds in memory (about 27 KB a part): a batch bounds it whatever the number of parts


def compact_table(folder: Loc, max_files: int = MAX_FILES, batch: int = BATCH) -> tuple[int, int]:
    """Compact the done parts of one table's folder: each `batch` of loose parts into one new file, then, when
    the table would hold more than `max_files` compacted files (also when a merge was cut short: a full disk),
    all of them merged into one. Returns (parts compacted, compacted files written)."""
    files = folder.files(PART_SUFFIX)
    loose = [f for f in files if not is_compacted(f)]
    old = sum(1 for f in files if is_compacted(f))
    parts = written = 0
    for start in range(0, len(loose), batch):
        n = _compact_batch(folder, loose[start : start + batch])
        parts, written = parts + n, written + (n > 0)  # a batch with a done part writes one file
    if old + written > max_files and _merge_compacted(folder):
        written += 1
    return parts, written


class UnverifiedCopy(OSError):
    """A compacted file that, read back just after it was written, is not what was written (unreadable, or other
    parts in it): the parts it was to hold stay loose."""


def _write_verified(folder: Loc, table: pa.Table) -> Loc:
    """`table` (with its `_part` column) as a new compacted file of `folder`, written whole and then read back:
    its checksum verified and its `_part` column the one written, or `UnverifiedCopy`. A write that raised
    (the store's retries spent: `StoreUnavailable`, a full disk) raises too: nothing may be deleted then, even
    where the file landed with its answer lost (a part twice, which readers count once)."""
    loc = folder / compacted_name()
    loc.write_parquet(table)
    try:
        back = _columns(loc, [PART_COLUMN])
    except StoreUnavailable:
        raise
    except Exception as exc:  # truncated, its checksum wrong, gone
        raise UnverifiedCopy(f"{loc}: expected the compacted file just written, found it unreadable ({exc})") from exc
    if PART_COLUMN not in back.column_names or not back[PART_COLUMN].equals(table[PART_COLUMN]):
        raise UnverifiedCopy(f"{loc}: expected the {table.num_rows} rows just written, found others")
    return loc


def _delete(files: list[Loc]) -> None:
    with ThreadPoolExecutor(max_workers=16) as pool:  # on an object store each delete is a request or two
        list(pool.map(lambda f: f.unlink(missing_ok=True), files))


def _compact_batch(folder: Loc, loose: list[Loc]) -> int:
    """The done parts among `loose` into one new compacted file (written whole and verified), then deleted; how
    many."""
    with ThreadPoolExecutor(max_workers=16) as pool:  # on an object store each read is a request
        read = [(p, t) for p, t in zip(loose, pool.map(_done_part, loose)) if t is not None]
    if not read:
        return 0
    _write_verified(folder, pa.concat_tables([t for _, t in read], promote_options="permissive"))
    _delete([p for p, _ in read])
    return len(read)


def _merge_compacted(folder: Loc) -> bool:
    """Every readable compacted file of `folder` into one, each part's copy the readers keep (`winners`): a few
    large tables, cheap to hold. One that cannot be read (truncated, its checksum wrong) stays, for the planner
    to set aside. Whether it wrote a file (not for fewer than two readable ones)."""
    old, tables = [], []
    for f in [f for f in folder.files(PART_SUFFIX) if is_compacted(f)]:
        try:
            tables.append(_sourced(f.read_parquet(), f.name))
        except Exception:  # unreadable: holds nothing (`compacted_statuses`)
            continue
        old.append(f)
    if len(tables) < 2:
        return False
    merged = keep_winners(pa.concat_tables(tables, promote_options="permissive"), SOURCE).drop_columns([SOURCE])
    _write_verified(folder, merged)  # whole and read back, or nothing deleted
    _delete(old)
    return True


def compact_above() -> int:
    """How many files a table may hold before a run compacts it: `STITCHSWEEP_COMPACT_ABOVE` (default
    `MAX_FILES`). Below it a listing is already cheap, and a small sweep keeps one file per unit."""
    import os

    raw = os.environ.get("STITCHSWEEP_COMPACT_ABOVE", str(MAX_FILES))
    try:
        return max(0, int(raw))
    except ValueError:
        raise ValueError(f"STITCHSWEEP_COMPACT_ABOVE: expected a whole number of files, found {raw!r}") from None


def compact(
    results, tables: list[str] | None = None, max_files: int = MAX_FILES, above: int = 0
) -> dict[str, tuple[int, int]]:
    """Compact every table folder of a sweep's results (or those named) that holds more than `above` files
    (0: every one with a done part). Table -> (parts, files written)."""
    from sweep.store.layout import tables as all_tables

    root = open_root(results)
    out = {}
    for name in tables or all_tables():
        folder = root / name
        if folder.exists() and (not above or len(folder.files(PART_SUFFIX)) > above):
            out[name] = compact_table(folder, max_files)
    return out
