"""How a sweep's parts are written (atomically) and checked. Where they go is `sweep.store.layout`'s (`SweepDir`);
reading is `analysis.load`'s job; the filesystem (local folder or pyarrow.fs URI) is `sweep.store.storage`'s.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from sweep.store.layout import SweepDir
from sweep.store.retry import StoreUnavailable
from sweep.store.storage import TMP_PREFIX, Loc, StorageError, open_root

__all__ = [
    "SweepDir",
    "Loc",
    "StorageError",
    "open_root",
    "write_rows",
    "read_status",
    "part_rows",
    "recorded_row",
    "set_aside",
    "writable_or_error",
    "remove_stale_tmp",
    "TMP_PREFIX",
]


def write_rows(path: Loc, rows: list[dict], schema: pa.Schema) -> None:
    """Write rows as one Parquet file with exactly `schema` (missing fields are null), atomically."""
    extra = {k for r in rows for k in r} - set(schema.names)
    if extra:
        raise KeyError(f"fields not in the results schema: {sorted(extra)}")
    try:
        table = pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
        raise misfit(rows, schema) or exc from None
    open_root(path).write_parquet(table)


def misfit(rows: list[dict], schema: pa.Schema) -> ValueError | None:
    """The first value of `rows` that does not fit its column of `schema`, as an error naming the column, its
    type and what was found (Arrow's own message names neither); None when each column converts alone."""
    for f in schema:
        for r in rows:
            try:
                pa.array([r.get(f.name)], type=f.type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
                value = r.get(f.name)
                shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
                return ValueError(f"column {f.name!r}: expected {f.type}, found {type(value).__name__} {shown}")
    return None


CORRUPT_SUFFIX = ".corrupt"


def read_status(part: Loc) -> str | None:
    """The `status` of a one-row part ("done" / "failed"), or None when the file cannot be read as one. A store
    that kept failing to answer raises `StoreUnavailable`: the part is not known unreadable (a run would set it
    aside and compute it again)."""
    try:
        return open_root(part).read_parquet(columns=["status"])["status"][0].as_py()
    except StoreUnavailable:
        raise
    except Exception:  # truncated, not Parquet, no status column, empty: all mean "not a usable record"
        return None


def set_aside(part: Loc) -> Loc:
    """Rename an unreadable part to `<name>.corrupt` (kept for inspection, no longer read as a result)."""
    part = open_root(part)
    return part.rename(part.with_name(part.name + CORRUPT_SUFFIX))


def recorded_row(part: Loc) -> dict | None:
    """The (first) row of one unit's part wherever it is recorded: the loose part when there is one, else its
    copy in the table's newest compacted file holding it (`sweep.store.compact`); None when neither is
    readable."""
    from sweep.store.compact import PART_COLUMN, is_compacted

    part = open_root(part)
    if part.exists():
        try:
            return part.read_parquet().slice(0, 1).to_pylist()[0]
        except StoreUnavailable:  # not known unreadable: the store did not answer
            raise
        except Exception:  # truncated, not Parquet, empty: not a usable record
            return None
    for f in reversed([f for f in part.parent.files(".parquet") if is_compacted(f)]):  # newest first
        try:
            t = f.read_parquet()
        except StoreUnavailable:
            raise
        except Exception:
            continue
        rows = t.filter(pa.compute.equal(t[PART_COLUMN], part.name)).slice(0, 1).drop_columns([PART_COLUMN])
        if rows.num_rows:
            return rows.to_pylist()[0]
    return None


def part_rows(folder: Loc) -> Iterator[dict]:
    """The rows of every readable part in a table's folder, loose or compacted (one copy of each part:
    `sweep.store.compact.winners`), in the parts' name order (none when it is missing): what the engine reads
    back of its own records without pandas (`analysis.reading` is the full reader)."""
    from sweep.store.compact import PART_COLUMN, winners

    if not folder.exists():
        return
    rows: list[tuple[str, str, dict]] = []
    for part in folder.files(".parquet"):
        try:
            got = part.read_parquet().to_pylist()
        except StoreUnavailable:  # not known unreadable: the store did not answer
            raise
        except Exception:  # truncated or not Parquet: not a record (`status` lists such parts)
            continue
        rows += [(part.name, r.pop(PART_COLUMN, part.name), r) for r in got]
    keep = winners([(f, p) for f, p, _ in rows])
    kept = [(p, f, r) for f, p, r in rows if (f, p) in keep]
    for _, _, row in sorted(kept, key=lambda x: x[0]):  # stable: a part's rows keep their order
        yield row


def writable_or_error(path: Loc) -> str | None:
    """None if files can be created under `path` (made if missing), else the reason they cannot."""
    try:
        path.mkdir()
        probe = path / f"{TMP_PREFIX}probe-{uuid.uuid4().hex[:8]}"
        probe.write_bytes(b"")
        probe.unlink()
    except Exception as exc:  # OSError locally; pyarrow raises OSError or ArrowException for remote stores
        text = str(exc).splitlines()[0] if str(exc) else ""
        reason = getattr(exc, "strerror", None) or text or type(exc).__name__
        return f"{type(exc).__name__}: {reason}"
    return None


def remove_stale_tmp(sweep: SweepDir) -> int:
    """Delete temporary files left by writers that died mid-write. Call only when no trial is running."""
    n = 0
    for d in sweep.temporary_folders():
        for p in d.rglob(f"{TMP_PREFIX}*"):
            p.unlink(missing_ok=True)
            n += 1
    return n


def save_torch(path: Loc, obj) -> None:
    """`torch.save` to a storage location, atomically (serialised in memory, then written in one go)."""
    import io

    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    open_root(path).write_bytes(buf.getvalue())


def load_torch(path: Loc, map_location=None):
    """`torch.load(..., weights_only=True)` from a storage location."""
    import io

    import torch

    return torch.load(io.BytesIO(open_root(path).read_bytes()), map_location=map_location, weights_only=True)
