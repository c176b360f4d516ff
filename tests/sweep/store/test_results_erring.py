"""The store's readers on an object store that errs for longer than pyarrow's own retries (about 6 s of them a
request): a part is read once the store answers again, and while it does not, the reader raises
`StoreUnavailable` instead of taking the part for an unreadable one (which `run` would rename `*.corrupt` and
compute again: the unit recorded twice over)."""

from __future__ import annotations

import time

import pytest

from sweep.store.layout import TRIALS_DIR, SweepDir
from sweep.store.results import part_rows, read_status, recorded_row, write_rows
from sweep.store.retry import RETRIES_ENV, StoreUnavailable
from sweep.store.schema import schema
from sweep.store.storage import open_root
from tests.sweep.store.test_storage import _uri


def test_a_part_the_store_errs_on_for_a_while_is_read_and_never_taken_for_unreadable(erring, monkeypatch):
    erring.rate = 0.0
    sweep_dir = SweepDir(open_root(_uri(erring.endpoint, f"reads-{time.time_ns()}")), "s")
    ids = ["t0", "t1", "t2"]
    for tid in ids:
        write_rows(sweep_dir.trial_part(tid), [{"trial_id": tid, "status": "done"}], schema(TRIALS_DIR))
    part = sweep_dir.trial_part("t1")
    erring.throttle(lambda r: r.key.endswith("/t1.parquet"), 8.0)  # past pyarrow's own 6 s of retries
    monkeypatch.setenv(RETRIES_ENV, "0")
    with pytest.raises(StoreUnavailable, match="t1.parquet: expected the object store to answer"):
        read_status(part)  # not None: a run would set the part aside as unreadable
    monkeypatch.delenv(RETRIES_ENV)
    assert read_status(part) == "done" and recorded_row(part)["trial_id"] == "t1"  # the store's retry: it answers
    assert sorted(r["trial_id"] for r in part_rows(sweep_dir.trials)) == ids
    assert [p.name for p in sweep_dir.trials.files(".parquet")] == [f"{t}.parquet" for t in ids]
