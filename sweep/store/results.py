"""The layout of a sweep's results and how parts are written (atomically). Reading is `analysis.load`'s job;
the filesystem (local folder or pyarrow.fs URI) is `sweep.store.storage`'s.

Layout under the storage root:
    <root>/zoo/<donor_key>/model.pt        cached donor checkpoints, shared by every sweep under this root
    <root>/<sweep>/space.yaml              the search space the sweep was started with
    <root>/<sweep>/trials/<trial_id>.parquet   one row per trial (done or failed)
    <root>/<sweep>/curves/<trial_id>.parquet   long format: trial_id, epoch, metric, value
    <root>/<sweep>/donors/<name>-<eval_id>.parquet   one row per donor and evaluation setting
    <root>/<sweep>/<table>/<unit_id>.parquet   the other kinds of work (`sweep.store.schema.TABLES`)
    <root>/<sweep>/inverted/<unit_id>.npz   an inversion unit's images (written before its part)
    <root>/<sweep>/stitchers/<trial_id>.pt  a trial's fitted stitcher (written before its part)
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa

from sweep.store.schema import CURVES_DIR, DONORS_DIR, REPTESTS_DIR, SPACE_FILE, TABLES, TRIALS_DIR
from sweep.store.storage import TMP_PREFIX, Loc, StorageError, child_uri, open_root
from sweep.store.units import INVERTED_DIR, STITCHERS_DIR

__all__ = [
    "SweepDir",
    "Loc",
    "StorageError",
    "open_root",
    "write_rows",
    "read_status",
    "set_aside",
    "writable_or_error",
    "remove_stale_tmp",
    "TMP_PREFIX",
]


class SweepDir:
    """Locations of one sweep's results (`<root>/<sweep>`); `root` is a local folder or a pyarrow.fs URI."""

    def __init__(self, root: str | Path | Loc, name: str, uri: str | None = None) -> None:
        self.root = open_root(root)
        self.name = name
        self.path = self.root / name
        # What a user types to reach this sweep (`stitchsweep resume URI`): a URI keeps its query options.
        self.uri = uri or (child_uri(root, name) if isinstance(root, str) else str(self.path))

    @property
    def trials(self) -> Loc:
        return self.path / TRIALS_DIR

    @property
    def curves(self) -> Loc:
        return self.path / CURVES_DIR

    @property
    def donors(self) -> Loc:
        return self.path / DONORS_DIR

    @property
    def reptests(self) -> Loc:
        return self.path / REPTESTS_DIR

    def reptest_part(self, unit_id: str) -> Loc:
        return self.reptests / f"{unit_id}.parquet"

    @property
    def space(self) -> Loc:
        return self.path / SPACE_FILE

    @property
    def ray(self) -> Loc:
        return self.path / "_ray"

    def zoo(self, donor_key: str) -> Loc:
        return self.root / "zoo" / donor_key

    def trial_part(self, trial_id: str) -> Loc:
        return self.trials / f"{trial_id}.parquet"

    def table(self, name: str) -> Loc:
        """The folder of results table `name` (`sweep.store.schema.TABLES`)."""
        return self.path / name

    def part(self, table: str, unit_id: str) -> Loc:
        return self.table(table) / f"{unit_id}.parquet"

    def stitcher(self, trial_id: str) -> Loc:
        """A trial's fitted stitcher (and the donors' moved BatchNorm statistics), written before its part."""
        return self.path / STITCHERS_DIR / f"{trial_id}.pt"

    def inverted(self, unit_id: str) -> Loc:
        """An inversion unit's images: a folder of shards and an index (`sweep.store.inverted`)."""
        from sweep.store.inverted import folder

        return folder(self.path, unit_id)

    def create(self) -> None:
        for name in TABLES:
            self.table(name).mkdir()


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
    files = (sweep.path / INVERTED_DIR, sweep.path / STITCHERS_DIR, sweep.root / "zoo")
    for d in (*(sweep.table(name) for name in TABLES), *files):
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
