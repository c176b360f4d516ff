"""Compaction of a sweep's parts (`sweep.store.compact`): few files per table, the same rows for every reader,
exactly-once after a crash mid-compaction, failed rows superseded by reruns, a glob that counts each row once,
and folders only for the kinds a sweep has units of. Parts are written with the store's own writer; no Ray."""

from __future__ import annotations

import pyarrow.dataset as ds
import pytest
import yaml

from analysis.reading import read_table
from sweep.config.space import parse_space
from sweep.planning import planning
from sweep.registry import KINDS
from sweep.store import compact as compaction
from sweep.store.layout import SNAPSHOT_DIR, TRIALS_DIR, SweepDir, tables
from sweep.store.results import part_rows, recorded_row, write_rows
from sweep.store.schema import schema
from sweep.store.snapshot import write_snapshot
from sweep.store.storage import Loc


def _write_trial(sweep_dir: SweepDir, trial_id: str, status: str = "done", acc: float = 0.5) -> None:
    row = {"trial_id": trial_id, "status": status, "clean_acc": acc if status == "done" else None}
    write_rows(sweep_dir.trial_part(trial_id), [row], schema(TRIALS_DIR))


def _rows(sweep_dir: SweepDir) -> list[tuple]:
    t = read_table(sweep_dir.path, TRIALS_DIR).to_pandas()
    return sorted(zip(t["trial_id"], t["status"], t["clean_acc"].fillna(-1.0)))


def _files(folder: Loc) -> list[str]:
    return [f.name for f in folder.files(".parquet")]


@pytest.fixture
def tiny(tiny_space, tmp_path):
    """The tiny space's sweep, its results folder (made as `run` makes it) and its trial ids."""
    sweep = parse_space(tiny_space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    sweep_dir.space.write_text(yaml.safe_dump(tiny_space))
    return sweep, sweep_dir, list(KINDS["trial"].units(sweep))


def test_compaction_keeps_the_rows_and_at_most_max_files_per_table(tmp_path):
    """40 parts compact into one file; compacting again and again merges before a table passes `max_files`;
    the reader and the engine's `part_rows` see the same rows before and after, each once."""
    sweep_dir = SweepDir(tmp_path, "s")
    for i in range(40):
        _write_trial(sweep_dir, f"t{i:04d}", acc=i / 40)
    before = _rows(sweep_dir)
    assert compaction.compact(sweep_dir.path) == {TRIALS_DIR: (40, 1)}  # only the folders that exist
    assert len(_files(sweep_dir.trials)) == 1 and _rows(sweep_dir) == before
    for i in range(40, 48):  # later stages, one part each, with a limit of 5 files
        _write_trial(sweep_dir, f"t{i:04d}", acc=0.25)
        compaction.compact_table(sweep_dir.trials, max_files=5)
        assert 1 <= len(_files(sweep_dir.trials)) <= 5
    assert all(n.startswith(compaction.COMPACTED_PREFIX) for n in _files(sweep_dir.trials))
    rows = _rows(sweep_dir)
    assert len(rows) == 48 and rows[:40] == before
    engine = [(r["trial_id"], r["clean_acc"]) for r in part_rows(sweep_dir.trials)]
    assert len(engine) == 48 and "_part" not in next(iter(part_rows(sweep_dir.trials)))
    assert compaction.compact(sweep_dir.path) == {TRIALS_DIR: (0, 0)}  # nothing loose: nothing written


def test_a_crash_between_the_compacted_file_and_the_deletions_leaves_each_unit_once(tiny, monkeypatch):
    """Killed after the compacted file is written and before the loose parts are deleted: both copies exist,
    and every reader (the planner's scan, `read_table`, `part_rows`) still counts each unit once; the next
    compaction finishes the job."""
    sweep, sweep_dir, ids = tiny
    for tid in ids:
        _write_trial(sweep_dir, tid)
    before = _rows(sweep_dir)

    def killed(self, missing_ok=False):
        raise KeyboardInterrupt("killed mid-compaction")

    with monkeypatch.context() as m:
        m.setattr(Loc, "unlink", killed)
        with pytest.raises(KeyboardInterrupt):
            compaction.compact(sweep_dir.path)
    names = _files(sweep_dir.trials)
    assert len(names) == len(ids) + 1  # every loose part and the compacted file holding them all
    assert _rows(sweep_dir) == before
    assert len(list(part_rows(sweep_dir.trials))) == len(ids)
    prog = planning.progress(sweep, sweep_dir, ["trial"])["trial"]
    assert sorted(prog.done) == sorted(ids) and not prog.pending and not prog.failed
    assert planning.to_run(sweep, sweep_dir, retry_failed=True, dry=True)["trial"] == []
    compaction.compact(sweep_dir.path)  # again: a newer file holds them; readers keep its copy
    assert _rows(sweep_dir) == before and not any(sweep_dir.trial_part(i).exists() for i in ids)


def test_recorded_units_are_found_in_compacted_files(tiny):
    """After compaction no loose part is left, and the planner still counts every unit done: nothing to run."""
    sweep, sweep_dir, ids = tiny
    for tid in ids:
        _write_trial(sweep_dir, tid)
    compaction.compact(sweep_dir.path)
    assert not sweep_dir.trial_part(ids[0]).exists()
    prog = planning.progress(sweep, sweep_dir, ["trial"])["trial"]
    assert sorted(prog.done) == sorted(ids) and planning.to_run(sweep, sweep_dir, False)["trial"] == []
    assert recorded_row(sweep_dir.trial_part(ids[0]))["status"] == "done"
    assert recorded_row(sweep_dir.trial_part("no-such-trial")) is None


def test_a_failed_part_stays_loose_and_its_rerun_supersedes_it(tiny):
    """Compaction takes done parts only: a failed unit stays a loose part, `resume --failed` removes it and the
    rerun's done row is the unit's only row; a loose part rewritten after compaction wins over its copy."""
    sweep, sweep_dir, ids = tiny
    failed, *done = ids
    _write_trial(sweep_dir, failed, status="failed")
    for tid in done:
        _write_trial(sweep_dir, tid)
    assert compaction.compact(sweep_dir.path)[TRIALS_DIR] == (len(done), 1)
    assert sweep_dir.trial_part(failed).exists()
    prog = planning.progress(sweep, sweep_dir, ["trial"])["trial"]
    assert prog.failed == [failed] and sorted(prog.done) == sorted(done)
    assert planning.to_run(sweep, sweep_dir, retry_failed=True)["trial"] == [failed]  # its part removed
    _write_trial(sweep_dir, failed, acc=0.9)  # the rerun
    compaction.compact(sweep_dir.path)
    rows = _rows(sweep_dir)
    assert len(rows) == len(ids) and (failed, "done", 0.9) in rows
    _write_trial(sweep_dir, done[0], acc=0.1)  # rewritten loose (e.g. a donor evaluated again): newer
    assert (done[0], "done", 0.1) in _rows(sweep_dir) and len(_rows(sweep_dir)) == len(ids)


def test_a_recursive_glob_of_the_results_counts_each_row_once(tiny):
    """Parts, a compacted file and the reader's snapshot: `pyarrow.dataset` over the whole folder, and over a
    `**/*.parquet` glob of it (which skips no folder), sees each trial once; an earlier release's
    snapshot file (`_snapshot/trials.parquet`) is removed by the next snapshot."""
    sweep, sweep_dir, ids = tiny
    for tid in ids[:2]:
        _write_trial(sweep_dir, tid)
    compaction.compact(sweep_dir.path)
    for tid in ids[2:]:
        _write_trial(sweep_dir, tid)
    legacy = sweep_dir.path / SNAPSHOT_DIR / "trials.parquet"
    legacy.write_parquet(read_table(sweep_dir.path, TRIALS_DIR))
    write_snapshot(sweep_dir.path)
    # the whole folder, its space.yaml and status files skipped (pyarrow's default skips `_`-prefixed folders)
    folder = ds.dataset(sweep_dir.path.path, format="parquet", exclude_invalid_files=True)
    globbed = ds.dataset([p.path for p in sweep_dir.path.rglob("*.parquet")], format="parquet")  # `**/*.parquet`
    assert folder.count_rows() == globbed.count_rows() == len(ids)
    assert _rows(sweep_dir) == sorted((t, "done", 0.5) for t in ids)
    assert not legacy.exists() and (sweep_dir.path / SNAPSHOT_DIR).files("") != []


def test_a_fresh_sweep_has_folders_only_for_the_kinds_it_has_units_of(tiny, tmp_path):
    """`run`'s preparation makes the tables of the kinds the space has units of (the tiny space: donors and
    trials), not one folder per registered kind."""
    from sweep.api.running import prepare as _prepare

    sweep, _, _ = tiny
    fresh = SweepDir(tmp_path / "fresh", sweep.name)
    _prepare(fresh, sweep)
    made = {loc.name for loc in fresh.path.glob("*")}
    expected = {k.table for k in KINDS.values() if k.schema is not None and k.units(sweep)}
    assert made == expected == {"donors", TRIALS_DIR} and len(tables()) > len(made)


def test_the_compact_command_compacts_an_old_sweep(tiny, capsys):
    """`stitchsweep compact RESULTS` on a sweep written before compaction existed."""
    from sweep.cli import main

    sweep, sweep_dir, ids = tiny
    for tid in ids:
        _write_trial(sweep_dir, tid)
    assert main(["compact", str(sweep_dir.path)]) == 0
    assert f"compacted {len(ids)} parts into 1 file(s)" in capsys.readouterr().out
    assert len(_files(sweep_dir.trials)) == 1 and len(_rows(sweep_dir)) == len(ids)


def test_the_donor_stage_and_the_trials_find_a_compacted_donor_row(tiny):
    """After the zoo stage's compaction, the donor stage still sees its evaluation recorded (not redone) and a
    trial still takes the donor's accuracies from its row (not measured again)."""
    from sweep.kinds.donor.run import _recorded
    from sweep.worker.zoo import donor_row

    sweep, sweep_dir, _ = tiny
    donor, evals = sweep.donors["plain_a"], sweep.donor_evals["plain_a"]
    ev = evals[0]
    part = sweep_dir.donor_part(donor.name, ev.eval_id(donor.donor_key))
    row = {"donor": donor.name, "donor_key": donor.donor_key, "status": "done", "clean_acc": 0.75}
    write_rows(part, [{**row, **ev.row_fields(), "eval_id": ev.eval_id(donor.donor_key)}], schema("donors"))
    assert compaction.compact(sweep_dir.path)["donors"] == (1, 1) and not part.exists()
    assert _recorded(part, with_train=False)
    assert donor_row(sweep_dir, donor.name, ev.eval_id(donor.donor_key), donor.donor_key, ev)["clean_acc"] == 0.75


def test_an_unreadable_compacted_file_is_set_aside_by_a_run_and_its_units_run_again(tiny):
    """`status` only counts the units of a truncated compacted file as pending; a run's scan renames it
    `*.corrupt` and schedules them."""
    sweep, sweep_dir, ids = tiny
    for tid in ids:
        _write_trial(sweep_dir, tid)
    compaction.compact(sweep_dir.path)
    (compacted,) = sweep_dir.trials.files(".parquet")
    compacted.write_bytes(b"PAR1 truncated")
    assert sorted(planning.progress(sweep, sweep_dir, ["trial"])["trial"].pending) == sorted(ids)
    assert compacted.exists()  # `status` only looks
    assert sorted(planning.to_run(sweep, sweep_dir, False)["trial"]) == sorted(ids)
    assert not compacted.exists() and compacted.with_name(compacted.name + ".corrupt").exists()


def test_a_run_compacts_only_the_tables_over_its_threshold(tmp_path, monkeypatch):
    """At the end of a stage a table is compacted only when it holds more than `compact_above()` files
    (`STITCHSWEEP_COMPACT_ABOVE`, default 100): a small sweep keeps a part per unit, a large one at most that
    many files a table."""
    import pyarrow as pa

    from sweep.store.compact import compact, compact_above
    from sweep.store.storage import open_root

    root = open_root(tmp_path)
    for k in range(5):
        (root / "trials" / f"t{k}.parquet").write_parquet(pa.table({"trial_id": [f"t{k}"], "status": ["done"]}))
    monkeypatch.setenv("STITCHSWEEP_COMPACT_ABOVE", "5")
    assert compact_above() == 5 and compact(tmp_path, ["trials"], above=compact_above()) == {}
    assert len(list((tmp_path / "trials").glob("*.parquet"))) == 5  # at the threshold: left as it is
    monkeypatch.setenv("STITCHSWEEP_COMPACT_ABOVE", "4")
    assert compact(tmp_path, ["trials"], above=compact_above()) == {"trials": (5, 1)}
    assert len(list((tmp_path / "trials").glob("*.parquet"))) == 1
    monkeypatch.setenv("STITCHSWEEP_COMPACT_ABOVE", "many")
    with pytest.raises(ValueError, match="STITCHSWEEP_COMPACT_ABOVE"):
        compact_above()


def test_parts_are_compacted_a_batch_at_a_time_and_merged_past_max_files(tmp_path):
    """7 parts in batches of 3: three files, each part once for every reader; with room for only 2 compacted
    files a table's files are merged into one, the rows unchanged. A batch bounds what a compaction holds."""
    sweep_dir = SweepDir(tmp_path, "s")
    for i in range(7):
        _write_trial(sweep_dir, f"t{i:04d}", acc=i / 7)
    before = _rows(sweep_dir)
    assert compaction.compact_table(sweep_dir.trials, max_files=10, batch=3) == (7, 3)
    assert len(_files(sweep_dir.trials)) == 3 and _rows(sweep_dir) == before
    _write_trial(sweep_dir, "t0001", acc=0.99)  # a rerun: its loose part supersedes the compacted copy
    assert compaction.compact_table(sweep_dir.trials, max_files=2, batch=3) == (1, 2)  # its batch, then the merge
    assert len(_files(sweep_dir.trials)) == 1
    rows = _rows(sweep_dir)
    after = {t: a for t, _, a in rows}
    assert len(rows) == len(after) == 7 and after["t0001"] == 0.99 and after["t0002"] == 2 / 7
