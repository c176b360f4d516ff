"""The results of a sweep are the units of its current plan: after an edit that changes units' ids (a donor's
setting here, as an edited plugin's version does), the earlier units' parts are stale: out of every table, of
the report's data and of the documented glob, counted apart by `status`, read on request, removed by `prune
--stale`; a grown space keeps every earlier unit; reverting the edit makes the old units current again without
computing them."""

import copy
import glob
import os
from collections import Counter

import pyarrow.parquet as pq

import analysis
from sweep.cli import main
from sweep.config.space import parse_space
from sweep.kinds.donor.run import base_row
from sweep.kinds.trial.run import config_row
from sweep.planning import planning
from sweep.planning.current import retire_stale
from sweep.planning.status import print_status
from sweep.registry import KINDS
from sweep.store.compact import compact
from sweep.store.results import SweepDir, write_rows
from sweep.store.schema import schema, trial_schema
from tests.conftest import TINY_SPACE


def space(epochs: int = 4, points=("layer1.0", "layer3.1")) -> dict:
    s = copy.deepcopy(TINY_SPACE)
    s["donors"]["plain_a"]["epochs"] = epochs  # part of the donor's key, so of every trial's id
    s["stitching"]["stitch_points"] = list(points)
    return s


def record(sweep, sweep_dir) -> None:
    """Every unit of `sweep` recorded done, as the kinds write their parts (a trial with its curves)."""
    for work in KINDS["donor"].units(sweep).values():
        for ev in work.evaluations:
            row = dict(base_row(work.donor, sweep.name), **ev.row_fields(), eval_id=ev.eval_id(work.donor.donor_key))
            write_rows(sweep_dir.donors / f"{work.donor.name}-{row['eval_id']}.parquet", [row | {"status": "done"}],
                       schema("donors"))  # fmt: skip
    for spec in sweep.trials:
        write_rows(sweep_dir.trial_part(spec.trial_id), [config_row(spec, sweep.name) | {"status": "done"}],
                   trial_schema())  # fmt: skip
        curve = [{"trial_id": spec.trial_id, "epoch": 1, "metric": "train_loss", "value": 0.5}]
        write_rows(sweep_dir.curve_part(spec.trial_id), curve, schema("curves"))


def globbed(folder) -> Counter:
    """Rows per table as the documented recursive glob `RESULTS/**/*.parquet` reads them."""
    rows = Counter()
    for path in glob.glob(f"{folder}/**/*.parquet", recursive=True):
        rows[os.path.relpath(path, folder).split(os.sep)[0]] += pq.read_metadata(path).num_rows
    return rows


def test_an_edit_leaves_the_earlier_units_stale_and_reverting_it_brings_them_back(tmp_path, monkeypatch, capsys):
    v1, v2 = parse_space(space(4)), parse_space(space(5))
    sweep_dir = SweepDir(tmp_path, v1.name)
    sweep_dir.create()
    record(v1, sweep_dir)
    assert retire_stale(v1, sweep_dir) == ({}, {})
    compact(sweep_dir.path, above=0)  # compacted files then hold the first version's rows
    monkeypatch.setenv("STITCHSWEEP_COMPACT_ABOVE", "0")

    gone, back = retire_stale(v2, sweep_dir)  # the run of the edited space, before its units run
    assert gone == {"trials": 4, "curves": 4, "donors": 1} and back == {}
    record(v2, sweep_dir)
    compact(sweep_dir.path, above=0)
    ids = {t.trial_id for t in v2.trials}
    tables = analysis.load(sweep_dir.path)
    assert set(tables["trials"]["trial_id"]) == ids and len(tables["trials"]) == 4
    assert set(tables["curves"]["trial_id"]) == ids
    assert list(tables["donors"]["donor_key"]) == [v2.donors["plain_a"].donor_key]  # one row: the current donor
    assert globbed(sweep_dir.path) == {"trials": 4, "curves": 4, "donors": 1}
    both = analysis.load(sweep_dir.path, stale=True)["trials"]
    assert Counter(both["stale"]) == {False: 4, True: 4}
    assert set(both.loc[both["stale"], "trial_id"]) == {t.trial_id for t in v1.trials}

    assert print_status(v2, sweep_dir)
    assert "stale, no longer in the space (kept in _stale/, not read): 4 curves, 1 donors, 4 trials" in (
        capsys.readouterr().out
    )

    gone, back = retire_stale(v1, sweep_dir)  # the edit reverted: the first version's units, recorded
    assert back == {"trials": 4, "curves": 4, "donors": 1} and gone == {"trials": 4, "curves": 4, "donors": 1}
    prog = planning.progress(v1, sweep_dir)
    assert len(prog["trial"].done) == 4 and not prog["trial"].pending and prog["donor"].done == ["plain_a"]
    assert set(analysis.load(sweep_dir.path)["trials"]["trial_id"]) == {t.trial_id for t in v1.trials}
    assert globbed(sweep_dir.path) == {"trials": 4, "curves": 4, "donors": 1}


def test_a_grown_space_keeps_every_unit_and_a_shrunk_one_says_what_became_stale(tmp_path):
    small, grown = parse_space(space(points=("layer1.0",))), parse_space(space(points=("layer1.0", "layer3.1")))
    sweep_dir = SweepDir(tmp_path, small.name)
    sweep_dir.create()
    record(small, sweep_dir)
    assert retire_stale(grown, sweep_dir) == ({}, {})  # growing: the earlier ids are all still in the space
    record(grown, sweep_dir)
    gone, _ = retire_stale(small, sweep_dir)  # shrinking: the units of layer3.1
    assert gone == {"trials": 2, "curves": 2}
    assert set(analysis.load(sweep_dir.path)["trials"]["trial_id"]) == {t.trial_id for t in small.trials}


def test_prune_stale_removes_only_the_stale_parts(tmp_path, write_space, capsys):
    v1, v2 = parse_space(space(4)), parse_space(space(5))
    sweep_dir = SweepDir(tmp_path / "results", v1.name)
    sweep_dir.create()
    record(v1, sweep_dir)
    retire_stale(v2, sweep_dir)
    record(v2, sweep_dir)
    sweep_dir.space.write_text(write_space(space(5)).read_text())
    assert main(["du", str(sweep_dir.path)]) == 0
    assert "stale parts" in capsys.readouterr().out
    assert main(["prune", str(sweep_dir.path)]) == 0  # without --stale: kept
    assert len(analysis.load(sweep_dir.path, stale=True)["trials"]) == 8
    assert main(["prune", str(sweep_dir.path), "--stale"]) == 0
    assert len(analysis.load(sweep_dir.path, stale=True)["trials"]) == 4
    assert globbed(sweep_dir.path)["trials"] == 4
