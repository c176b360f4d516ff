"""A stitching trial on a full disk (`sweep.kinds.trial.run.run_trial`): its curves or its part finding no room
leave the trial unrecorded (pending, not failed) and raise `DiskFull`; run again with space freed, it is
recorded once, with its curves. The fit itself is replaced by a stand-in: only the writes are under test."""

from __future__ import annotations

import pytest
import torch

from sweep.config.space import parse_space
from sweep.kinds.trial import run as stitch
from sweep.store.layout import CURVES_DIR
from sweep.store.results import SweepDir, read_status
from sweep.store.storage import DiskFull


@pytest.fixture
def trial(tiny_space, tmp_path, monkeypatch):
    sweep = parse_space(tiny_space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()

    def fitted(trial, splits):
        return {"clean_acc": 0.5}, [(1, "train_loss", 0.25)]

    monkeypatch.setattr(stitch, "worker_splits", lambda *a, **k: None)
    monkeypatch.setattr(stitch, "_stitch_and_evaluate", fitted)
    return sweep.trials[0], sweep_dir


@pytest.mark.parametrize("where", ["curves", "trials"])
def test_a_trial_whose_writes_find_the_disk_full_is_pending_and_runs_once_later(trial, full_disk, where):
    spec, sweep_dir = trial
    part, curve = sweep_dir.trial_part(spec.trial_id), sweep_dir.curve_part(spec.trial_id)
    full_disk(f"/{where}/", times=1)  # a failed row written next would fit: none is
    with pytest.raises(DiskFull) as got:
        stitch.run_trial(spec, sweep_dir, device=torch.device("cpu"))
    assert got.value.folder == str(part.parent if where == "trials" else curve.parent)
    assert not part.exists() and read_status(part) is None  # not recorded failed: pending
    assert curve.exists() == (where == "trials")  # a curve written before the part is replaced by the rerun
    full_disk(None)
    row = stitch.run_trial(spec, sweep_dir, device=torch.device("cpu"))
    assert row["status"] == "done" and read_status(part) == "done"
    assert stitch.run_trial(spec, sweep_dir)["status"] == "skipped"  # recorded once
    assert [f.name for f in (sweep_dir.path / CURVES_DIR).files(".parquet")] == [curve.name]
    assert curve.read_parquet().num_rows == 1
