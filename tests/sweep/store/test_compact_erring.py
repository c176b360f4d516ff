"""Compaction on an object store that errs (a long sweep's fault): through a proxy answering a fifth of the requests
with 500/503 (seed 0; tests/sweep/store/erring_s3.py), no loose part, and no compacted file a merge replaces, is
deleted before the compacted file that holds it was written whole and read back; a compacted file that landed
but was answered as failed deletes nothing and is harmless (each part read once); a compacted file that does
not read back as written deletes nothing."""

from __future__ import annotations

import time

import pytest

from analysis.reading import read_table
from sweep.store import compact as compaction
from sweep.store.compact import PART_COLUMN, is_compacted, recorded_parts
from sweep.store.layout import TRIALS_DIR, SweepDir
from sweep.store.results import write_rows
from sweep.store.retry import RETRIES_ENV, StoreUnavailable
from sweep.store.schema import schema
from sweep.store.storage import Loc, open_root
from tests.sweep.store.erring_s3 import ErringS3, Request
from tests.sweep.store.test_storage import _uri


def _write(sweep_dir: SweepDir, ids: list[str]) -> None:
    for tid in ids:
        write_rows(sweep_dir.trial_part(tid), [{"trial_id": tid, "status": "done", "clean_acc": 0.5}],
                   schema(TRIALS_DIR))  # fmt: skip


def _ids(sweep_dir: SweepDir) -> list[str]:
    return sorted(read_table(sweep_dir.path, TRIALS_DIR)["trial_id"].to_pylist())


def _both(s3_endpoint: str, proxy: ErringS3) -> tuple[SweepDir, SweepDir]:
    """The same sweep's folder straight on moto (to set up and read back) and through the erring proxy."""
    prefix = f"compact-{time.time_ns()}"
    return SweepDir(open_root(_uri(s3_endpoint, prefix)), "s"), SweepDir(open_root(_uri(proxy.endpoint, prefix)), "s")


def _first(log: list[Request], test) -> int:
    return next((i for i, r in enumerate(log) if test(r)), len(log))


def _deleted_only_after_written_and_read_back(log: list[Request], compacted: str, held: set[str]) -> None:
    """Every landed DELETE of a key in `held` comes after `compacted`'s upload completed and a whole read of it."""
    completed = _first(log, lambda r: r.key == compacted and r.method == "POST" and "uploadId=" in r.query and r.landed)
    read_back = _first(log[completed:], lambda r: r.key == compacted and r.method == "GET" and r.ok) + completed
    deletes = [i for i, r in enumerate(log) if r.method == "DELETE" and r.landed and r.key in held]
    assert deletes and completed < read_back < min(deletes), (compacted, completed, read_back, deletes[:3])


def test_compaction_through_an_erring_store_deletes_nothing_before_its_copy_is_written_and_read_back(s3, erring):
    direct, through = _both(s3, erring)
    ids = [f"t{i:02d}" for i in range(24)]
    _write(direct, ids[:16])
    assert compaction.compact_table(through.trials, batch=8) == (16, 2)
    first = {f.name: f.read_parquet()[PART_COLUMN].to_pylist() for f in direct.trials.files(".parquet")}
    assert len(first) == 2 and sorted(p for held in first.values() for p in held) == [f"{t}.parquet" for t in ids[:16]]
    key = direct.trials.path + "/"
    for name, held in first.items():
        _deleted_only_after_written_and_read_back(erring.log, key + name, {key + p for p in held})
    assert _ids(direct) == ids[:16]

    _write(direct, ids[16:])
    start = len(erring.log)
    assert compaction.compact_table(through.trials, max_files=1) == (8, 2)  # a batch, then the merge of three
    (merged,) = direct.trials.files(".parquet")
    assert is_compacted(merged) and sorted(merged.read_parquet()[PART_COLUMN].to_pylist()) == [
        f"{t}.parquet" for t in ids
    ]
    _deleted_only_after_written_and_read_back(erring.log[start:], merged.path, {key + n for n in first})
    assert _ids(direct) == ids and sorted(recorded_parts(direct.trials)) == [f"{t}.parquet" for t in ids]
    assert sum(r.fault is not None for r in erring.log) > 0.1 * len(erring.log)


def test_a_compacted_file_that_landed_but_was_answered_failed_deletes_nothing_and_is_read_once(s3, erring, monkeypatch):
    monkeypatch.setenv(RETRIES_ENV, "0")  # pyarrow's own: about 30 attempts of each completion, 6 s
    erring.rate = 0.0
    direct, through = _both(s3, erring)
    ids = [f"t{i:02d}" for i in range(10)]
    _write(direct, ids)
    loose = sorted(f.name for f in direct.trials.files(".parquet"))
    # every completion of a compacted upload lands, and is answered 500 InternalError
    erring.fail_after(lambda r: "@compacted-" in r.key and r.method == "POST" and "uploadId=" in r.query)
    with pytest.raises(StoreUnavailable, match=r"@compacted-.*expected the object store to answer"):
        compaction.compact_table(through.trials)
    erring.fail_after(None)
    assert sum(r.fault == "landed-then-500" for r in erring.log) > 1
    files = sorted(f.name for f in direct.trials.files(".parquet"))
    (orphan,) = [n for n in files if n.startswith(compaction.COMPACTED_PREFIX)]  # it landed, whole
    assert [n for n in files if n != orphan] == loose  # and no part was deleted
    assert not [r for r in erring.log if r.method == "DELETE"]
    assert _ids(direct) == ids and sorted(recorded_parts(direct.trials)) == loose  # each part once

    assert compaction.compact_table(through.trials) == (10, 1)  # the store answers again: done
    assert _ids(direct) == ids and len(direct.trials.files(".parquet")) == 2
    compaction.compact_table(through.trials, max_files=1)
    assert _ids(direct) == ids and len(direct.trials.files(".parquet")) == 1


def test_a_compacted_file_that_does_not_read_back_as_written_deletes_nothing(tmp_path, monkeypatch):
    """A store that acknowledged a compacted file but keeps other bytes (cut short): its parts stay loose."""
    sweep_dir = SweepDir(open_root(tmp_path), "s")
    ids = [f"t{i:02d}" for i in range(6)]
    _write(sweep_dir, ids)
    real = Loc._stream

    def cut_short(self, path: str, data: bytes) -> None:
        real(self, path, data[: len(data) // 2] if compaction.COMPACTED_PREFIX in path else data)

    monkeypatch.setattr(Loc, "_stream", cut_short)
    with pytest.raises(OSError, match="expected the compacted file just written, found it unreadable"):
        compaction.compact_table(sweep_dir.trials)
    assert sorted(f.name for f in sweep_dir.trials.files(".parquet") if not is_compacted(f)) == [
        f"{t}.parquet" for t in ids
    ]
    with pytest.warns(UserWarning, match="skipping unreadable results part .*@compacted-"):
        assert _ids(sweep_dir) == ids
