"""An object store that errs (a long sweep's store fault): moto's S3 server behind a proxy that answers a fifth of the
requests with 500 InternalError / 503 SlowDown (seed 0) and holds one write's answer past the client's timeout
(tests/sweep/store/erring_s3.py). The store's writes, reads, listings, deletes and renames retry the whole
operation (`sweep.store.retry`): every part written once and read whole, every row and id counted, nothing lost.
The last test runs the tiny sweep through it (Ray)."""

from __future__ import annotations

import logging
import posixpath
import time

import pyarrow.fs as pafs
import pytest

import analysis
from sweep.config.space import parse_space
from sweep.store import retry
from sweep.store.compact import recorded_parts
from sweep.store.layout import TRIALS_DIR, SweepDir
from sweep.store.results import part_rows, read_status, writable_or_error, write_rows
from sweep.store.retry import BACKOFF_ENV
from sweep.store.schema import schema
from sweep.store.storage import TMP_PREFIX, Loc, child_uri, open_root
from tests.sweep.store.erring_s3 import ErringS3, writes_of
from tests.sweep.store.test_storage import BUCKET, _cli, _uri

TRANSIENT_FAULTS = ("InternalError", "SlowDown", "ServiceUnavailable")


def _faults(proxy: ErringS3) -> int:
    return sum(r.fault in TRANSIENT_FAULTS for r in proxy.log)


def _write_parts(sweep_dir: SweepDir, ids: list[str]) -> None:
    for tid in ids:
        write_rows(sweep_dir.trial_part(tid), [{"trial_id": tid, "status": "done", "clean_acc": 0.5}],
                   schema(TRIALS_DIR))  # fmt: skip


def _each_once(sweep_dir: SweepDir, ids: list[str]) -> None:
    parts = sweep_dir.trials.files(".parquet")
    assert [p.name for p in parts] == [f"{t}.parquet" for t in ids]  # each once, no temporary name
    assert [read_status(p) for p in parts] == ["done"] * len(ids)
    rows = list(part_rows(sweep_dir.trials))
    assert sorted(r["trial_id"] for r in rows) == ids and len(rows) == len(ids)


def test_parts_through_an_erring_store_are_each_written_once_and_read_whole(erring):
    sweep_dir = SweepDir(open_root(_uri(erring.endpoint, f"erring-{time.time_ns()}")), "s")
    sweep_dir.create()
    ids = [f"t{i:02d}" for i in range(12)]
    erring.throttle(lambda r: r.key.endswith("/t05.parquet"), 9.0)  # a burst past pyarrow's own 6 s of retries
    _write_parts(sweep_dir, ids)
    _each_once(sweep_dir, ids)
    assert _faults(erring) > 0.1 * len(erring.log), "the proxy answered too few requests with errors"


@pytest.mark.slow  # the client's own timeout: about 9 s
def test_a_write_whose_answer_times_out_is_sent_again_and_recorded_once(erring):
    sweep_dir = SweepDir(open_root(_uri(erring.endpoint, f"timeout-{time.time_ns()}")), "s")
    sweep_dir.create()
    ids = [f"t{i:02d}" for i in range(6)]
    # past the client's timeout, then SlowDown past pyarrow's own retries: the store's retry sends it again
    erring.hold(lambda r: r.method == "PUT" and r.key.endswith("/t03.parquet"), 15.0, then_throttle=15.0)
    _write_parts(sweep_dir, ids)
    _each_once(sweep_dir, ids)
    (held,) = [r for r in erring.log if r.fault == "held"]
    assert held.landed  # the write reached the store; the client timed out and sent it again
    assert any(r.ok for r in writes_of(erring.log[erring.log.index(held) + 1 :], held.key))


LOST = "AWS Error INTERNAL_FAILURE during DeleteObject operation: We encountered an internal error. Please try again."


class LostAnswers(pafs.FileSystemHandler):
    """A local folder whose deletes and moves of files (not of a writer's temporary file) are carried out, then
    reported failed `times` times each: a store whose answer to a request that landed never reaches the client."""

    def __init__(self, times: int) -> None:
        self.fs, self.times = pafs.LocalFileSystem(), {"delete_file": times, "move": times}

    def _lost(self, op: str, path: str) -> None:
        if self.times[op] > 0 and not posixpath.basename(path).startswith(TMP_PREFIX):
            self.times[op] -= 1
            raise OSError(LOST)

    def delete_file(self, path):
        self.fs.delete_file(path)
        self._lost("delete_file", path)

    def move(self, src, dest):
        self.fs.move(src, dest)
        self._lost("move", src)

    def get_type_name(self):
        return "lost-answers"

    def get_file_info(self, paths):
        return self.fs.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.fs.get_file_info(selector)

    def normalize_path(self, path):
        return self.fs.normalize_path(path)

    def open_output_stream(self, path, metadata):
        return self.fs.open_output_stream(path, metadata=metadata)

    def open_input_stream(self, path):
        return self.fs.open_input_stream(path)

    def open_input_file(self, path):
        return self.fs.open_input_file(path)

    def open_append_stream(self, path, metadata):
        return self.fs.open_append_stream(path, metadata=metadata)

    def create_dir(self, path, recursive):
        self.fs.create_dir(path, recursive=recursive)

    def delete_dir(self, path):
        self.fs.delete_dir(path)

    def delete_dir_contents(self, path, missing_dir_ok=False):
        self.fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self):
        raise OSError("not here")

    def copy_file(self, src, dest):
        self.fs.copy_file(src, dest)


def test_a_delete_or_rename_whose_answer_was_lost_is_done_once_on_any_store(tmp_path, monkeypatch):
    monkeypatch.setenv(BACKOFF_ENV, "0")
    root = Loc(pafs.PyFileSystem(LostAnswers(times=2)), tmp_path.as_posix())
    a = root / "a.parquet"
    a.write_bytes(b"part")
    moved = a.rename(a.with_name("b.parquet"))  # done, reported failed: the retry finds it done
    assert not a.exists() and moved.read_bytes() == b"part"
    moved.unlink()  # not missing_ok: the retry finds it gone, which is what the lost answers were
    assert not moved.exists() and sorted(p.name for p in tmp_path.iterdir()) == []
    assert root.fs.handler.times == {"delete_file": 1, "move": 1}  # each retried once, not done twice


@pytest.mark.slow  # pyarrow's own retries of each lost answer first: about 15 s
def test_a_delete_or_rename_whose_answer_was_lost_is_done_once(erring):
    erring.rate = 0.0
    root = open_root(_uri(erring.endpoint, f"lost-{time.time_ns()}"))
    a = root / "a.parquet"
    a.write_bytes(b"part")

    def deletes(name):
        return lambda r: r.method == "DELETE" and r.key.endswith(f"/{name}")

    # the rename's copy lands, its delete lands and is answered 500 every time pyarrow asks
    erring.fail_after(deletes("a.parquet"))
    moved = a.rename(a.with_name("b.parquet"))
    erring.fail_after(None)
    assert not a.exists() and moved.read_bytes() == b"part"
    erring.fail_after(deletes("b.parquet"))
    moved.unlink()  # not missing_ok: the retry finds it gone, which is what the lost answers were
    erring.fail_after(None)
    assert not moved.exists() and root.glob("*") == []
    assert sum(r.fault == "landed-then-500" for r in erring.log) >= 6


def test_errors_that_are_not_transient_are_raised_at_once(erring, caplog):
    erring.rate = 0.0
    root = open_root(_uri(erring.endpoint, f"plain-{time.time_ns()}"))
    caplog.set_level(logging.INFO, logger=retry.__name__)
    with pytest.raises(FileNotFoundError):
        (root / "missing.parquet").read_bytes()
    t0 = time.perf_counter()
    problem = writable_or_error(open_root(_uri(erring.endpoint, "x").replace(BUCKET, "no-such-bucket")))
    assert problem is not None and "no-such-bucket" in problem and time.perf_counter() - t0 < 5
    assert not caplog.records, "a missing file or bucket was retried"


@pytest.mark.ray
@pytest.mark.slow
def test_a_sweep_through_an_erring_store_records_each_unit_once(erring, s3, tiny_space, write_space, monkeypatch):
    monkeypatch.setenv("STITCHSWEEP_COMPACT_ABOVE", "0")  # compaction through the erring store too
    tiny_space["stitching"]["objectives"] = ["dm"]
    space = write_space(tiny_space)
    prefix = f"erring-sweeps-{time.time_ns()}"
    # the first trial part's upload: its answer held past the client's timeout, then a burst of SlowDown
    erring.hold(lambda r: r.method == "PUT" and "/tiny/trials/" in r.key, 15.0, then_throttle=15.0)
    planned = {t.trial_id for t in parse_space(tiny_space).trials}

    out = _cli("run", space, "--storage", _uri(erring.endpoint, prefix), "--num-cpus", 2).stdout
    assert "2 trials: 2 done, 0 failed, 0 pending" in out
    status = _cli("status", child_uri(_uri(erring.endpoint, prefix), "tiny"))
    assert status.returncode == 0 and "2 trials: 2 done" in status.stdout

    direct = open_root(child_uri(_uri(s3, prefix), "tiny"))  # read back past the proxy
    assert {n.removesuffix(".parquet") for n in recorded_parts(direct / "trials")} == planned
    trials = analysis.load_trials(direct)
    assert len(trials) == len(planned) and set(trials["trial_id"]) == planned and trials["trial_id"].is_unique
    assert (trials["status"] == "done").all(), trials["error"].tolist()
    assert len(analysis.load(direct)["donors"]) == 1
    assert not direct.rglob(".tmp-*") and not direct.rglob("*.corrupt")
    assert [r.fault for r in erring.log].count("held") == 1 and _faults(erring) > 10
