"""Where results live and how parts are written (atomically). Reading is `analysis.load`'s job.

Layout under the storage root:
    <root>/zoo/<donor_key>/model.pt        cached donor checkpoints, shared by every sweep under this root
    <root>/<sweep>/space.yaml              the search space the sweep was started with
    <root>/<sweep>/trials/<trial_id>.parquet   one row per trial (done or failed)
    <root>/<sweep>/curves/<trial_id>.parquet   long format: trial_id, epoch, metric, value
    <root>/<sweep>/donors/<name>-<eval_id>.parquet   one row per donor and evaluation setting
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from analysis.schema import CURVES_DIR, DONORS_DIR, REPTESTS_DIR, SPACE_FILE, TRIALS_DIR

TMP_PREFIX = ".tmp-"


class SweepDir:
    """Paths of one sweep's results (`<root>/<sweep>`)."""

    def __init__(self, root: str | Path, name: str) -> None:
        self.root = Path(root).absolute()
        self.name = name
        self.path = self.root / name

    @property
    def trials(self) -> Path:
        return self.path / TRIALS_DIR

    @property
    def curves(self) -> Path:
        return self.path / CURVES_DIR

    @property
    def donors(self) -> Path:
        return self.path / DONORS_DIR

    @property
    def reptests(self) -> Path:
        return self.path / REPTESTS_DIR

    def reptest_part(self, unit_id: str) -> Path:
        return self.reptests / f"{unit_id}.parquet"

    @property
    def space(self) -> Path:
        return self.path / SPACE_FILE

    @property
    def ray(self) -> Path:
        return self.path / "_ray"

    def zoo(self, donor_key: str) -> Path:
        return self.root / "zoo" / donor_key

    def trial_part(self, trial_id: str) -> Path:
        return self.trials / f"{trial_id}.parquet"

    def create(self) -> None:
        for d in (self.trials, self.curves, self.donors, self.reptests):
            d.mkdir(parents=True, exist_ok=True)


def atomic_write_bytes(path: Path, write) -> None:
    """Call `write(tmp_path)` then rename onto `path`: a reader sees the old file, or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}.{uuid.uuid4().hex[:8]}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_rows(path: Path, rows: list[dict], schema: pa.Schema) -> None:
    """Write rows as one Parquet file with exactly `schema` (missing fields are null), atomically."""
    extra = {k for r in rows for k in r} - set(schema.names)
    if extra:
        raise KeyError(f"fields not in the results schema: {sorted(extra)}")
    table = pa.Table.from_pylist(rows, schema=schema)
    atomic_write_bytes(path, lambda tmp: pq.write_table(table, tmp))


CORRUPT_SUFFIX = ".corrupt"


def read_status(part: Path) -> str | None:
    """The `status` of a one-row part ("done" / "failed"), or None when the file cannot be read as one."""
    try:
        return pq.read_table(part, columns=["status"])["status"][0].as_py()
    except Exception:  # truncated, not Parquet, no status column, empty: all mean "not a usable record"
        return None


def set_aside(part: Path) -> Path:
    """Rename an unreadable part to `<name>.corrupt` (kept for inspection, no longer read as a result)."""
    target = part.with_name(part.name + CORRUPT_SUFFIX)
    os.replace(part, target)
    return target


def writable_or_error(path: Path) -> str | None:
    """None if files can be created under `path` (made if missing), else the reason they cannot."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f"{TMP_PREFIX}probe-{uuid.uuid4().hex[:8]}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror or exc}"
    return None


def remove_stale_tmp(sweep: SweepDir) -> int:
    """Delete temporary files left by writers that died mid-write. Call only when no trial is running."""
    n = 0
    for d in (sweep.trials, sweep.curves, sweep.donors, sweep.reptests, sweep.root / "zoo"):
        if d.exists():
            for p in d.rglob(f"{TMP_PREFIX}*"):
                p.unlink()
                n += 1
    return n
