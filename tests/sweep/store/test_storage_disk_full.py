"""A full disk (`sweep.store.storage.DiskFull`): a write that finds no room leaves no file a reader reads (not
even its temporary one), keeps the file it would have replaced, and raises one error naming the folder and the
bytes it needed, intact through pickling (a Ray worker's reaches the driver) and found however it is wrapped."""

from __future__ import annotations

import errno
import os
import pickle

import cloudpickle
import pyarrow as pa
import pytest

from sweep.store import storage
from sweep.store.layout import TRIALS_DIR, SweepDir
from sweep.store.results import read_status, save_torch, write_rows
from sweep.store.schema import schema
from sweep.store.storage import DiskFull, Loc, disk_full_in, open_root


def _listing(folder: Loc) -> list[str]:
    return sorted(i.base_name for i in folder._children())


def test_a_write_on_a_full_disk_leaves_no_file_keeps_the_old_one_and_names_folder_and_bytes(tmp_path, full_disk):
    target = open_root(tmp_path) / "t" / "file.bin"
    target.write_bytes(b"v1")
    full_disk("file.bin")
    with pytest.raises(DiskFull) as got:
        target.write_bytes(b"x" * 5000)
    exc = got.value
    assert (exc.folder, exc.needed, exc.errno) == (str(target.parent), 5000, errno.ENOSPC)
    assert (
        str(exc)
        == f"{target.parent}: expected room to write 5,000 bytes, found the disk full (No space left on device)"
    )
    assert isinstance(exc, OSError) and isinstance(exc.__cause__, OSError)  # the filesystem's own error kept
    assert _listing(target.parent) == ["file.bin"] and target.read_bytes() == b"v1"  # no .tmp-*, the old bytes


def test_a_part_on_a_full_disk_is_no_part(tmp_path, full_disk):
    sweep_dir = SweepDir(tmp_path, "s")
    part = sweep_dir.trial_part("t0")
    full_disk("t0.parquet")
    with pytest.raises(DiskFull, match=f"^{sweep_dir.trials}: expected room to write [0-9,]+ bytes"):
        write_rows(part, [{"trial_id": "t0", "status": "done"}], schema(TRIALS_DIR))
    assert _listing(sweep_dir.trials) == [] and read_status(part) is None  # pending, not failed
    full_disk(None)
    write_rows(part, [{"trial_id": "t0", "status": "done"}], schema(TRIALS_DIR))
    assert read_status(part) == "done" and _listing(sweep_dir.trials) == ["t0.parquet"]


def test_a_checkpoint_on_a_full_disk_is_no_checkpoint(tmp_path, full_disk):
    ckpt = open_root(tmp_path) / "zoo" / "d" / "model.pt"
    full_disk("model.pt")
    with pytest.raises(DiskFull) as got:
        save_torch(ckpt, {"w": list(range(1000))})
    assert got.value.folder == str(ckpt.parent) and got.value.needed > 1000
    assert _listing(ckpt.parent) == []


def test_a_rename_that_finds_no_room_removes_the_temporary_file(tmp_path, monkeypatch):
    class NoRoomToRename:
        def __getattr__(self, name):
            return getattr(os, name)

        def replace(self, src, dst):
            raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))

    monkeypatch.setattr(storage, "os", NoRoomToRename())
    target = open_root(tmp_path) / "a.parquet"
    with pytest.raises(DiskFull, match="expected room to write 3 bytes, found its quota reached"):
        target.write_bytes(b"abc")
    assert _listing(target.parent) == []


def test_other_write_errors_are_not_a_full_disk(tmp_path, monkeypatch):
    def denied(self, path, data):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(Loc, "_stream", denied)
    with pytest.raises(PermissionError) as got:
        (open_root(tmp_path) / "a.bin").write_bytes(b"abc")
    assert not isinstance(got.value, DiskFull)


def test_disk_full_survives_pickling_and_is_found_however_it_is_wrapped():
    exc = DiskFull("/results/s/trials", 41_169)
    for back in (pickle.loads(pickle.dumps(exc)), cloudpickle.loads(cloudpickle.dumps(exc))):
        assert type(back) is DiskFull and (back.folder, back.needed, back.errno) == (exc.folder, 41_169, 28)
        assert str(back) == str(exc)
    try:
        try:
            raise exc
        except DiskFull as inner:
            raise RuntimeError("the kind's own wrapper") from inner
    except RuntimeError as outer:
        assert disk_full_in(outer) is exc

    class TaskError(Exception):  # Ray's RayTaskError keeps what the task raised as `cause`
        def __init__(self, cause):
            super().__init__("Traceback (most recent call last): ...")
            self.cause = cause

    assert disk_full_in(TaskError(exc)) is exc
    plain = disk_full_in(OSError(errno.ENOSPC, "No space left on device", "/scratch/x/file.pt"))
    assert (plain.folder, plain.needed) == ("/scratch/x", None)
    assert str(plain) == "/scratch/x: expected room to write its file, found the disk full (No space left on device)"
    assert disk_full_in(ValueError("no")) is None and disk_full_in(OSError(errno.EIO, "I/O error")) is None
    assert disk_full_in(pa.ArrowInvalid("not Parquet")) is None
