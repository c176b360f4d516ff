"""A full disk is not a unit's failure (`sweep.kinds.base.not_a_failure`): a unit whose part, or anything its
code writes, finds no room records nothing (not even a failed row), and the `DiskFull` goes past the unit to the
backend, unwrapped; with space freed the unit runs once and is recorded done."""

from __future__ import annotations

import errno

import pytest
import torch

from sweep.kinds.base import Kind, RunContext, record_unit, run_recorded
from sweep.kinds.examples.table import TABLE as EXAMPLES_DIR
from sweep.store.results import SweepDir, read_status, write_rows
from sweep.store.schema import schema
from sweep.store.storage import DiskFull


def test_record_unit_raises_a_full_disk_instead_of_recording_the_unit_failed(tmp_path, full_disk):
    part = SweepDir(tmp_path, "s").part(EXAMPLES_DIR, "u1")
    full_disk("u1.parquet", times=1)  # a failed row written next would fit: none is
    with pytest.raises(DiskFull) as got:
        record_unit(part, EXAMPLES_DIR, {"unit_id": "u1"}, lambda: [{"name": "a"}])
    assert got.value.folder == str(part.parent) and got.value.needed > 0
    assert not part.exists() and read_status(part) is None  # pending: no failed row either
    full_disk(None)
    assert record_unit(part, EXAMPLES_DIR, {"unit_id": "u1"}, lambda: [{"name": "a"}])["status"] == "done"
    assert part.read_parquet().num_rows == 1


def test_a_full_disk_inside_a_units_measure_is_raised_unwrapped(tmp_path):
    part = SweepDir(tmp_path, "s").part(EXAMPLES_DIR, "u1")

    def measure():
        try:
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "shards" / "s0.npz"))
        except OSError as exc:
            raise RuntimeError("writing the unit's shards") from exc  # a kind's own wrapping

    with pytest.raises(DiskFull, match=f"^{tmp_path / 'shards'}: expected room to write its file"):
        record_unit(part, EXAMPLES_DIR, {"unit_id": "u1"}, measure)
    assert not part.exists()


def _kind(tmp_path) -> Kind:
    def parts(sweep_dir, unit):
        return [sweep_dir.part(EXAMPLES_DIR, unit)]

    def run(unit, ctx):
        write_rows(parts(ctx.sweep_dir, unit)[0], [{"unit_id": unit, "status": "done", "name": "x"}],
                   schema(EXAMPLES_DIR))  # fmt: skip
        return {"status": "done"}

    return Kind("full", "full", "full units", EXAMPLES_DIR, parts, run, str, section="full",
                parse=lambda raw, ctx: (), unit_id=str)  # fmt: skip


def test_run_recorded_lets_a_full_disk_through_and_records_nothing(tmp_path, full_disk):
    kind, ctx = _kind(tmp_path), RunContext(SweepDir(tmp_path, "s"), torch.device("cpu"))
    (part,) = kind.parts(ctx.sweep_dir, "u1")
    full_disk("u1.parquet", times=1)  # a failed row written next would fit: none is
    with pytest.raises(DiskFull):
        run_recorded(kind, "u1", ctx)
    assert not part.exists()  # not the failed row run_recorded writes for a kind that raises
    full_disk(None)
    assert run_recorded(kind, "u1", ctx) == {"status": "done"} and read_status(part) == "done"
