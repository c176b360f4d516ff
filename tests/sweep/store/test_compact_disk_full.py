"""Compaction on a full disk (`sweep.store.compact`): the compacted file that finds no room is no file, every
loose part it would have held stays, the readers see the same rows, and the compaction run again once space is
freed holds each part once."""

from __future__ import annotations

import pytest

from analysis.reading import read_table
from sweep.store import compact as compaction
from sweep.store.layout import TRIALS_DIR, SweepDir
from sweep.store.results import write_rows
from sweep.store.schema import schema
from sweep.store.storage import DiskFull


def _write_trial(sweep_dir: SweepDir, trial_id: str) -> None:
    write_rows(sweep_dir.trial_part(trial_id), [{"trial_id": trial_id, "status": "done", "clean_acc": 0.5}],
               schema(TRIALS_DIR))  # fmt: skip


def _rows(sweep_dir: SweepDir) -> list[str]:
    return sorted(read_table(sweep_dir.path, TRIALS_DIR)["trial_id"].to_pylist())


@pytest.mark.parametrize("merging", [False, True])
def test_a_compaction_that_finds_the_disk_full_loses_nothing_and_completes_once_space_is_freed(
    tmp_path, full_disk, merging
):
    sweep_dir = SweepDir(tmp_path, "s")
    ids = [f"t{i:03d}" for i in range(12)]
    for tid in ids[:6]:
        _write_trial(sweep_dir, tid)
    if merging:  # a compacted file already: the next compaction past max_files=1 merges the two
        compaction.compact_table(sweep_dir.trials)
    for tid in ids[6:]:
        _write_trial(sweep_dir, tid)
    before = sorted(f.name for f in sweep_dir.trials.files(".parquet"))
    failed = full_disk(compaction.COMPACTED_PREFIX, after=1 if merging else 0)  # merging: the batch's file fits
    with pytest.raises(DiskFull) as got:
        compaction.compact_table(sweep_dir.trials, max_files=1)
    assert got.value.folder == str(sweep_dir.trials) and got.value.needed > 0
    assert f"{got.value.needed:,} bytes" in str(got.value)
    assert len(failed) == 1
    now = sorted(f.name for f in sweep_dir.trials.files(".parquet"))
    if merging:  # the batch's file written and its parts deleted; the merge wrote nothing and deleted nothing
        assert len(now) == 2 and before[0] in now and all(compaction.COMPACTED_PREFIX in n for n in now)
    else:
        assert now == before  # nothing written, nothing deleted
    assert not [i for i in sweep_dir.trials._children() if i.base_name.startswith(".tmp-")]
    assert _rows(sweep_dir) == ids

    full_disk(None)
    compaction.compact_table(sweep_dir.trials, max_files=1)
    (left,) = sweep_dir.trials.files(".parquet")
    assert compaction.is_compacted(left) and _rows(sweep_dir) == ids  # each part once
