"""Stitching trials in-process (no Ray): objectives, evaluation, idempotence, failure recording."""

import copy
import dataclasses
import os

import pandas as pd
import pytest
import torch

import analysis
from sweep import objectives
from sweep.results import SweepDir
from sweep.spec import parse_space
from sweep.trial import run_trial
from sweep.zoo import run_donor

from .conftest import TINY_SPACE


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """A tiny trained donor on the digits, shared by the tests of this module."""
    space = copy.deepcopy(TINY_SPACE)
    space["stitching"]["stitch_points"] = "all"
    sweep = parse_space(space)
    root = tmp_path_factory.mktemp("results")
    sweep_dir = SweepDir(root, sweep.name)
    sweep_dir.create()
    row = run_donor(sweep.donors["plain_a"], sweep.evaluation, sweep_dir, torch.device("cpu"))
    assert row["status"] == "done", row.get("error")
    assert row["clean_acc"] > 0.5  # it learned something: self-stitching below is not a trivial chance match
    return sweep, sweep_dir


def test_dm_self_stitching_gives_relative_accuracy_one_at_every_point(zoo):
    sweep, sweep_dir = zoo
    dm = [dataclasses.replace(t, n_eval_robust=0) for t in sweep.trials if t.objective == "dm"]
    assert len(dm) == 6
    for spec in dm:
        row = run_trial(spec, sweep_dir)
        assert row["status"] == "done", row.get("error")
        assert row["relative_acc"] == 1.0, (spec.front_point, row["relative_acc"])
        assert row["dm_residual"] < 1e-4


def test_tlm_trial_records_metrics_curves_and_is_idempotent(zoo):
    sweep, sweep_dir = zoo
    spec = next(t for t in sweep.trials if t.objective == "tlm" and t.front_point == "layer2.0")
    row = run_trial(spec, sweep_dir)
    assert row["status"] == "done", row.get("error")
    assert 0.0 <= row["robust_acc"] <= row["clean_acc"] + 0.1
    assert row["most_frequent_class_ratio"] >= 0.1
    assert row["end_clean_acc"] is not None and row["time_fit_s"] > 0
    part = sweep_dir.trial_part(spec.trial_id)
    mtime = os.stat(part).st_mtime_ns
    assert run_trial(spec, sweep_dir)["status"] == "skipped"
    assert os.stat(part).st_mtime_ns == mtime
    curves = analysis.load_curves(sweep_dir.path)
    mine = curves[curves["trial_id"] == spec.trial_id]
    assert set(mine["metric"]) == {"train_loss", "val_acc"}


def test_random_init_tlm_learns_a_useful_stitch(zoo):
    sweep, sweep_dir = zoo
    spec = next(t for t in sweep.trials if t.objective == "tlm" and t.front_point == "layer3.0")
    spec = dataclasses.replace(spec, epochs=3, n_eval_robust=0)
    row = run_trial(spec, sweep_dir)
    assert row["relative_acc"] > 0.8, row


def test_a_diverging_objective_is_recorded_as_failed(zoo, monkeypatch):
    sweep, sweep_dir = zoo

    def diverge(ctx):
        raise objectives.DivergedError("task loss became nan in epoch 1")

    monkeypatch.setitem(objectives.OBJECTIVES, "tlm", dataclasses.replace(objectives.OBJECTIVES["tlm"],
                                                                          fit=diverge))
    spec = next(t for t in sweep.trials if t.objective == "tlm" and t.front_point == "layer1.1")
    row = run_trial(spec, sweep_dir)
    assert row["status"] == "failed" and "nan" in row["error"]
    trials = analysis.load_trials(sweep_dir.path).set_index("trial_id")
    assert trials.loc[spec.trial_id, "status"] == "failed"
    assert pd.isna(trials.loc[spec.trial_id, "clean_acc"])


def test_nan_loss_in_task_loss_matching_is_detected(zoo):
    sweep, sweep_dir = zoo
    spec = next(t for t in sweep.trials if t.objective == "tlm" and t.front_point == "layer1.0")
    spec = dataclasses.replace(spec, lr=float("inf"), n_eval_robust=0)
    row = run_trial(spec, sweep_dir)
    assert row["status"] == "failed"
    assert "DivergedError" in row["error"] or "FloatingPointError" in row["error"]


def test_missing_donor_checkpoint_fails_the_trial_not_the_sweep(zoo, tmp_path):
    sweep, _ = zoo
    empty = SweepDir(tmp_path, sweep.name)
    empty.create()
    row = run_trial(sweep.trials[0], empty)
    assert row["status"] == "failed" and "zoo stage" in row["error"]


def test_donors_are_cached_across_sweeps_by_their_training_config(zoo):
    sweep, sweep_dir = zoo
    other = SweepDir(sweep_dir.root, "another-sweep")
    other.create()
    row = run_donor(sweep.donors["plain_a"], sweep.evaluation, other, torch.device("cpu"))
    assert row["status"] == "done" and row["trained_now"] is False
    assert row["time_train_s"] < 5


@pytest.mark.parametrize("donor_bn,moves", [("frozen", False), ("update", True)])
def test_donor_batchnorm_policy(zoo, donor_bn, moves):
    from sweep.data import make_splits
    from sweep.models import split
    from sweep.stitching import Stitcher
    from sweep.zoo import load_donor

    sweep, sweep_dir = zoo
    spec = next(t for t in sweep.trials if t.objective == "tlm" and t.front_point == "layer2.0")
    spec = dataclasses.replace(spec, donor_bn=donor_bn, epochs=1)
    model = load_donor(sweep_dir, spec.end_key, torch.device("cpu"))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    front, end = split(model, spec.front_point)
    splits = make_splits(spec.dataset, spec.train_size, spec.val_size, spec.test_size)
    ctx = objectives.FitContext(front=front, end=end, stitcher=Stitcher(16, 16), splits=splits, spec=spec,
                                device=torch.device("cpu"))
    objectives.OBJECTIVES["tlm"].fit(ctx)
    after = model.state_dict()
    stats = [k for k in before if k.endswith("running_mean")]
    assert stats
    changed = any(not torch.equal(before[k], after[k]) for k in stats)
    assert changed is moves
    # parameters never train, whatever the policy
    params = [k for k, _ in model.named_parameters()]
    assert all(torch.equal(before[k], after[k]) for k in params)


def test_bf16_and_channels_last_are_recorded_and_part_of_the_identity(zoo):
    sweep, sweep_dir = zoo
    spec = next(t for t in sweep.trials if t.objective == "tlm" and t.front_point == "layer3.1")
    fast = dataclasses.replace(spec, precision="bf16", channels_last=True, n_eval_robust=0)
    assert fast.trial_id != spec.trial_id
    row = run_trial(fast, sweep_dir)
    assert row["status"] == "done", row.get("error")
    assert row["precision"] == "bf16" and row["channels_last"] is True
    assert row["relative_acc"] > 0.5
