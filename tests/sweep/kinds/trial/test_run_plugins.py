"""A stitching trial or a donor whose plugin code fails is recorded failed once, with its reason: a plugin index
that returns an array where a number belongs (its trials column named), a plugin network whose forward fails
only on the test images (the plugin's file and line named); the part says so, and running it again skips it."""

import copy

import pytest
import torch
import yaml

from sweep.config.space import load_space
from sweep.kinds.donor.run import run_donor
from sweep.kinds.trial.run import run_trial
from sweep.store.results import SweepDir, read_status
from tests.conftest import TINY_SPACE

PLUGIN = """
import numpy as np
from torch import nn

from sweep.measures.indices import register_index
from sweep.models.base import Normalize, StagedNet, register_architecture
from sweep.store.catalogue import IndexEntry


def r2_per_unit(a, b):
    return np.ones(3)  # the bug: one value per unit where the trials column holds one number


register_index(IndexEntry("{p}_r2", ("sim_{p}_r2",), "r2"), r2_per_unit, "flatten")


class Picky(nn.Module):
    def forward(self, x):
        if not self.training and len(x) > 2:  # the bug: only the evaluation's batches (no validation images)
            raise RuntimeError("picky about evaluation")
        return x


@register_architecture("{p}_cnn", "a small CNN")
def cnn(*, in_channels, num_classes, mean, std, image_size, picky=False):
    return StagedNet(
        [
            ("norm", Normalize(mean, std)),
            ("stem", nn.Sequential(nn.Conv2d(in_channels, 8, 3, stride=2, padding=1), nn.ReLU())),
            ("block1", nn.Sequential(nn.Conv2d(8, 8, 3, stride=2, padding=1), Picky() if picky else nn.ReLU())),
            ("head", nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, num_classes))),
        ],
        ["stem", "block1"],
    )


@register_architecture("{p}_picky", "a small CNN whose block1 fails in evaluation")
def picky(*, in_channels, num_classes, mean, std, image_size):
    return cnn(in_channels=in_channels, num_classes=num_classes, mean=mean, std=std, image_size=image_size, picky=True)
"""


@pytest.fixture
def study(plugin_file, tmp_path):
    path, module = plugin_file(PLUGIN.replace("{p}", "plug"))
    space = copy.deepcopy(TINY_SPACE)
    space["plugins"] = [path.name]
    space["donors"] = {
        "mine": {"arch": "plug_cnn", "training": "plain", "epochs": 1, "lr": 0.1, "seed": 0, "batch_size": 64},
        "picky": {"arch": "plug_picky", "training": "plain", "epochs": 1, "lr": 0.1, "seed": 0, "batch_size": 64},
    }
    space["data"]["val_size"] = 0
    space["stitching"] = dict(
        space["stitching"], pairs=[{"front": "zoo:mine", "end": "zoo:mine"}, {"front": "zoo:picky", "end": "zoo:picky"}]
    )
    space["stitching"].update(stitch_points=["stem"], objectives=["dm"], indices=["cka", "plug_r2"])
    space["evaluation"]["n_eval_robust"] = 0
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(space))
    sweep = load_space(tmp_path / "space.yaml")
    sweep_dir = SweepDir(tmp_path / "results", sweep.name)
    sweep_dir.create()
    return sweep, sweep_dir, path.read_text().splitlines(), module


def test_a_plugin_index_returning_an_array_fails_its_trial_once_naming_the_column(study):
    sweep, sweep_dir, _, _ = study
    row = run_donor(sweep.donors["mine"], sweep.donor_evals["mine"], sweep_dir, torch.device("cpu"))
    assert row["status"] == "done", row.get("error")
    (trial,) = [t for t in sweep.trials if t.front == "zoo:mine"]
    row = run_trial(trial, sweep_dir)  # returns: nothing raised to the backend
    assert row["status"] == "failed"
    assert row["error"].startswith("writing its row: ValueError: column 'sim_plug_r2': expected double, found ndarray")
    assert read_status(sweep_dir.trial_part(trial.trial_id)) == "failed"
    assert run_trial(trial, sweep_dir)["status"] == "skipped"  # recorded once: not tried again


def test_a_plugin_network_failing_only_on_the_test_images_fails_its_donor_naming_its_line(study):
    sweep, sweep_dir, lines, module = study
    line = next(i + 1 for i, text in enumerate(lines) if "picky about evaluation" in text)
    row = run_donor(sweep.donors["picky"], sweep.donor_evals["picky"], sweep_dir, torch.device("cpu"))
    assert row["status"] == "failed"  # trained, then failed on the test images
    assert row["error"] == f"RuntimeError: picky about evaluation (at {module}.py:{line} in forward)", row
