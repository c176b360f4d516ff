"""The node cache on a full disk (`sweep.worker.cache`): a file that finds no room costs the sharing, never the
unit: the value is returned, no file (nor its temporary one) is left for another worker to read, the next
worker recomputes it, and once space is freed the file is written and read. A record of the files used that
finds no room is given up the same way."""

from __future__ import annotations

import errno

import pytest
import torch

from sweep.worker import cache


def _fresh(tmp_path, **env) -> cache.WorkerCache:
    return cache.WorkerCache(cache.Settings.from_env({cache.DIR_ENV: str(tmp_path / "node"), **env}))


@pytest.fixture
def no_room(monkeypatch):
    """`torch.save` writes half its file, then fails as a full disk does, until `no_room(False)`."""
    real = torch.save
    full = {"on": True}

    def save(obj, f, *args, **kwargs):
        if not full["on"]:
            return real(obj, f, *args, **kwargs)
        real(obj, f, *args, **kwargs)
        with open(f, "r+b") as fh:
            fh.truncate(fh.seek(0, 2) // 2)
        raise OSError(errno.ENOSPC, "No space left on device", str(f))

    monkeypatch.setattr(torch, "save", save)
    return lambda on: full.update(on=on)


def test_a_cache_file_that_finds_no_room_is_recomputed_never_read_torn(tmp_path, no_room):
    value = torch.arange(1000.0)
    first = _fresh(tmp_path)
    assert torch.equal(first.get(("acts", 1), lambda: value, disk=True), value)  # the unit has its value
    assert list((tmp_path / "node").iterdir()) == []  # neither the file nor its temporary
    calls = []
    second = _fresh(tmp_path)  # another worker of the node
    assert torch.equal(second.get(("acts", 1), lambda: calls.append(1) or value, disk=True), value)
    assert calls == [1] and second.stats.misses == 1
    no_room(False)
    third = _fresh(tmp_path)
    third.get(("acts", 1), lambda: value, disk=True)
    fourth = _fresh(tmp_path)
    got = fourth.get(("acts", 1), lambda: pytest.fail("recomputed what the node has"), disk=True)
    assert torch.equal(got, value) and fourth.stats.disk_hits == 1


def test_a_background_write_and_the_record_on_a_full_disk_cost_nothing(tmp_path, no_room, full_disk):
    record = tmp_path / "sweep"
    c = _fresh(tmp_path, STITCHSWEEP_CACHE_RECORD=str(record))
    full_disk(cache.RECORD_DIR)
    value = torch.ones(64)
    assert torch.equal(c.on_disk(("acts", 2), lambda: value), value)
    c.flush()  # waits for the write that failed, then tries the record: neither raises
    assert list((tmp_path / "node").iterdir()) == [] and list((record / cache.RECORD_DIR).iterdir()) == []
    full_disk(None)
    no_room(False)
    c.store(("acts", 3), value)
    c.flush()
    assert len(list((tmp_path / "node").glob("*.pt"))) == 1 and len(list((record / cache.RECORD_DIR).iterdir())) == 1
