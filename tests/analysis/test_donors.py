"""Donors that ended training at chance (Smith & Marcu's VGG-19 on greyscale MNIST can): flagged in the donors
table, named by the zoo stage's warning, and marked on every trial built on them."""

import copy

import pandas as pd
import pytest
import torch

import analysis
from analysis.donors import at_chance, mark_trials
from sweep.config.space import parse_space
from sweep.kinds.donor.run import run_donor
from sweep.models.base import build
from sweep.store.results import SweepDir
from tests.conftest import TINY_SPACE


def test_chance_is_three_standard_errors_above_one_over_the_classes():
    # 10 classes, 359 images: chance 0.1, standard error sqrt(0.09 / 359) = 0.01583, bound 0.1475
    assert at_chance(0.1, 10, 359) and at_chance(0.147, 10, 359) and not at_chance(0.148, 10, 359)
    # fewer images, a wider band: 20 images, bound 0.1 + 3 * 0.0671 = 0.301
    assert at_chance(0.3, 10, 20) and not at_chance(0.31, 10, 20)
    assert not at_chance(0.894, 10, 359) and at_chance(0.5, 2, 100) and not at_chance(0.7, 2, 100)


@pytest.mark.slow
def test_a_constant_donor_is_flagged_warned_about_and_its_trials_marked(tmp_path):
    """A checkpoint whose classifier is all zeros predicts class 0 for every image: chance by construction (the
    share of 0s among the digits' test images, about 10%), while the trained donor (89-90% measured) is not."""
    from sweep.backends.stage import chance_warnings as _chance_warnings
    from sweep.registry import KINDS, resolve

    dead = build("resnet_tiny", 1, 10, (0.5,), (0.5,), image_size=28)
    state = {k: (torch.zeros_like(v) if k.startswith("stages.head") else v) for k, v in dead.state_dict().items()}
    assert any(k.startswith("stages.head") for k in state)
    torch.save(state, tmp_path / "dead.pt")
    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["dead"] = {"file": str(tmp_path / "dead.pt"), "arch": "resnet_tiny", "mean": [0.5], "std": [0.5]}
    space["stitching"]["pairs"].append({"front": "file:dead", "end": "zoo:plain_a"})
    space["evaluation"]["n_eval_robust"] = 0
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path / "results", sweep.name)
    sweep_dir.create()
    rows = {n: run_donor(d, sweep.donor_evals[n], sweep_dir, torch.device("cpu")) for n, d in sweep.donors.items()}
    assert rows["dead"]["status"] == "done" and rows["dead"]["at_chance"] is True and rows["dead"]["num_classes"] == 10
    assert rows["plain_a"]["at_chance"] is False
    donors = analysis.load_donors(sweep_dir.path)
    (line,) = resolve(KINDS["donor"].after_stage)(sweep, sweep_dir)  # what the zoo stage prints at its end
    assert resolve(KINDS["donor"].after_stage) is _chance_warnings
    assert line.startswith("warning: donor file:dead ended training at chance accuracy") and "donor_at_chance" in line
    trials = pd.DataFrame(
        [
            dict(front="file:dead", end="zoo:plain_a"),
            dict(front="zoo:plain_a", end="zoo:plain_a"),
            dict(front="file:dead", end="file:dead"),
        ]
    )
    assert mark_trials(trials, donors)["donor_at_chance"].tolist() == ["file:dead", "", "file:dead"]
