"""Parts that parse but lie (`sweep.store.checksum`): bytes flipped inside a data page of a part or of a compacted
file still parse without verification; every reader of the store refuses them (`analysis.load` lists them
under "problems" and leaves their rows out, the planner counts their units pending, a run sets them aside and
schedules each unit once), while files written before checksums existed still read."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

import analysis
from sweep.config.space import parse_space
from sweep.planning import planning
from sweep.registry import KINDS
from sweep.store import compact as compaction
from sweep.store.checksum import KEY, ChecksumError, parquet_bytes
from sweep.store.layout import TRIALS_DIR, SweepDir
from sweep.store.results import write_rows
from sweep.store.schema import schema
from sweep.store.storage import Loc


@pytest.fixture
def tiny(tiny_space, tmp_path):
    sweep = parse_space(tiny_space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    sweep_dir.space.write_text(yaml.safe_dump(tiny_space))
    return sweep, sweep_dir, list(KINDS["trial"].units(sweep))


def _write_trial(sweep_dir: SweepDir, trial_id: str, acc: float) -> None:
    write_rows(sweep_dir.trial_part(trial_id), [{"trial_id": trial_id, "status": "done", "clean_acc": acc}],
               schema(TRIALS_DIR))  # fmt: skip


def _unverified(data: bytes) -> pa.Table:
    return pq.ParquetFile(pa.BufferReader(data)).read()  # what a reader without checks sees


def flip_in_a_data_page(path: Loc, column: str = "clean_acc") -> int:
    """Flip one bit inside `column`'s data page (from its column chunk's `data_page_offset` on) so that the file
    still parses without verification but reads a different value: a part that lies. Returns the offset."""
    data = path.read_bytes()
    original = _unverified(data)
    chunk = pq.ParquetFile(pa.BufferReader(data)).metadata.row_group(0)
    meta = chunk.column(original.column_names.index(column))
    end = (meta.dictionary_page_offset or meta.data_page_offset) + meta.total_compressed_size
    for offset in range(meta.data_page_offset, end):
        for bit in range(8):
            bad = bytearray(data)
            bad[offset] ^= 1 << bit
            try:
                lies = not _unverified(bytes(bad)).equals(original)
            except Exception:  # does not parse: not the fault under test
                continue
            if lies:
                path.write_bytes(bytes(bad))
                return offset
    raise AssertionError(f"no flip inside {column}'s data page of {path} parses and changes what it reads")


def test_a_flipped_page_parses_unverified_but_every_reader_of_the_store_refuses_it(tiny):
    sweep, sweep_dir, ids = tiny
    for i, tid in enumerate(ids):
        _write_trial(sweep_dir, tid, acc=0.5 + i / 100)
    bad, good = ids[0], ids[1:]
    part = sweep_dir.trial_part(bad)
    flip_in_a_data_page(part)
    assert _unverified(part.read_bytes())["trial_id"].to_pylist() == [bad]  # parses, with a wrong value
    with pytest.raises(ChecksumError, match=f"{bad}.parquet: expected bytes whose SHA-256 is"):
        part.read_parquet()

    tables = analysis.load(sweep_dir.path)
    assert sorted(tables["trials"]["trial_id"]) == sorted(good)  # its row left out
    (problem,) = tables["problems"].to_dict("records")
    assert problem["path"] == str(part) and problem["error"].startswith("ChecksumError: ")

    assert bad in planning.progress(sweep, sweep_dir, ["trial"])["trial"].pending and part.exists()  # status looks
    assert planning.to_run(sweep, sweep_dir, retry_failed=False)["trial"] == [bad]  # once
    assert not part.exists() and part.with_name(part.name + ".corrupt").exists()  # set aside, kept
    assert planning.to_run(sweep, sweep_dir, retry_failed=False)["trial"] == [bad]  # nothing else, still once
    _write_trial(sweep_dir, bad, acc=0.9)  # the rerun
    assert planning.to_run(sweep, sweep_dir, retry_failed=False)["trial"] == []
    assert sorted(analysis.load(sweep_dir.path)["trials"]["trial_id"]) == sorted(ids)


def test_a_compacted_file_that_lies_holds_nothing_and_its_units_run_again_once(tiny):
    sweep, sweep_dir, ids = tiny
    for i, tid in enumerate(ids):
        _write_trial(sweep_dir, tid, acc=0.5 + i / 100)
    compaction.compact(sweep_dir.path)
    (compacted,) = sweep_dir.trials.files(".parquet")
    flip_in_a_data_page(compacted)
    assert sorted(_unverified(compacted.read_bytes())["trial_id"].to_pylist()) == sorted(ids)  # parses

    tables = analysis.load(sweep_dir.path)
    assert tables["trials"].empty and list(tables["problems"]["path"]) == [str(compacted)]
    assert sorted(planning.progress(sweep, sweep_dir, ["trial"])["trial"].pending) == sorted(ids)
    assert compaction.compact(sweep_dir.path) == {TRIALS_DIR: (0, 0)}  # a lying file is not merged
    assert sorted(planning.to_run(sweep, sweep_dir, retry_failed=False)["trial"]) == sorted(ids)
    assert not compacted.exists() and compacted.with_name(compacted.name + ".corrupt").exists()


def test_files_written_before_checksums_read_and_those_written_now_carry_them(tmp_path):
    sweep_dir = SweepDir(tmp_path, "s")
    table = pa.Table.from_pylist([{"trial_id": "t0", "status": "done", "clean_acc": 0.5}], schema=schema(TRIALS_DIR))
    sweep_dir.trials.mkdir()
    pq.write_table(table, sweep_dir.trial_part("t0").path)  # an earlier release's part: no checksum
    assert sweep_dir.trial_part("t0").read_parquet().equals(table)
    assert analysis.load(sweep_dir.path)["problems"].empty
    written = parquet_bytes(table)
    kv = pq.ParquetFile(pa.BufferReader(written)).metadata.metadata
    assert kv[KEY].startswith(b"sha256:") and b"ARROW:schema" in kv
    assert _unverified(written).equals(table)  # any reader reads it
    assert pq.ParquetFile(pa.BufferReader(written), page_checksum_verification=True).read().equals(table)


def test_a_merge_of_compacted_files_leaves_a_lying_one_alone(tmp_path):
    """Past `max_files` the compacted files are merged: the readable ones, each part once; the one whose
    checksum is wrong stays as it is (the planner sets it aside), and no reader takes its rows."""
    sweep_dir = SweepDir(tmp_path, "s")
    for batch in (["a0", "a1"], ["b0", "b1"], ["c0", "c1"]):
        for i, tid in enumerate(batch):
            _write_trial(sweep_dir, tid, acc=0.5 + i / 10)
        compaction.compact_table(sweep_dir.trials)
        if batch[0] == "a0":
            (lying,) = sweep_dir.trials.files(".parquet")
            flip_in_a_data_page(lying)
    assert compaction.compact_table(sweep_dir.trials, max_files=1) == (0, 1)  # b and c merged
    files = sweep_dir.trials.files(".parquet")
    assert len(files) == 2 and lying in files
    tables = analysis.load(sweep_dir.path)
    assert sorted(tables["trials"]["trial_id"]) == ["b0", "b1", "c0", "c1"]
    assert list(tables["problems"]["path"]) == [str(lying)]
