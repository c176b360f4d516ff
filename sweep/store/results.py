"""How a sweep's parts are written (atomically) and checked. Where they go is `sweep.store.layout`'s (`SweepDir`);
reading is `analysis.load`'s job; the filesystem (local folder or pyarrow.fs URI) is `sweep.store.storage`'s.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pyarrow as pa

from sweep.store.layout import SweepDir
from sweep.store.storage import TMP_PREFIX, Loc, StorageError, open_root

__all__ = [
    "SweepDir",
    "Loc",
    "StorageError",
    "open_root",
    "write_rows",
    "read_status",
    "part_rows",
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
    open_root(path).write_parquet(pa.Table.from_pylist(rows, schema=schema))


CORRUPT_SUFFIX = ".corrupt"


def read_status(part: Loc) -> str | None:
    """The `status` of a one-row part ("done" / "failed"), or None when the file cannot be read as one."""
    try:
        return open_root(part).read_parquet(columns=["status"])["status"][0].as_py()
    except Exception:  # truncated, not Parquet, no status column, empty: all mean "not a usable record"
        return None


def set_aside(part: Loc) -> Loc:
    """Rename an unreadable part to `<name>.corrupt` (kept for inspection, no longer read as a result)."""
    part = open_root(part)
    return part.rename(part.with_name(part.name + CORRUPT_SUFFIX))


def part_rows(folder: Loc) -> Iterator[dict]:
    """The rows of every readable part in a table's folder, in the parts' name order (none when it is missing):
    what the engine reads back of its own records without pandas (`analysis.reading` is the full reader)."""
    if not folder.exists():
        return
    for part in folder.files(".parquet"):
        try:
            rows = part.read_parquet().to_pylist()
        except Exception:  # truncated or not Parquet: not a record (`status` lists such parts)
            continue
        yield from rows


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
