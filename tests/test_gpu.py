"""GPU path: a stitching trial on CUDA with bf16 and channels-last. Skipped without CUDA."""

import copy
import dataclasses

import pytest
import torch

from sweep.config.space import parse_space
from sweep.kinds.donor import run_donor
from sweep.kinds.stitch import run_trial
from sweep.results import SweepDir

from .conftest import TINY_SPACE

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_trial_on_cuda_with_bf16_and_channels_last(tmp_path):
    space = copy.deepcopy(TINY_SPACE)
    space["stitching"].update(precision="bf16", channels_last=True)
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    cuda = torch.device("cuda")
    assert run_donor(sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, cuda)["status"] == "done"
    for spec in sweep.trials:
        row = run_trial(dataclasses.replace(spec, n_eval_robust=16), sweep_dir, device=cuda)
        assert row["status"] == "done", row.get("error")
        assert row["device"].startswith("cuda") and row["precision"] == "bf16"


def test_adversarial_objectives_and_trades_donor_on_cuda(tmp_path):
    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["trades_a"] = {"arch": "resnet_tiny", "training": "trades", "epochs": 1, "steps": 2}
    space["stitching"] = {
        "pairs": [{"front": "zoo:trades_a", "end": "zoo:plain_a"}],
        "stitch_points": ["layer2.0"],
        "objectives": ["adv", "adv_mix", "trades"],
        "alphas": [0.5],
        "betas": [1.5],
        "epochs": 1,
        "adv_steps": 2,
        "stitcher": "bn_affine_bn",
    }
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    cuda = torch.device("cuda")
    for donor in sweep.donors.values():
        assert run_donor(donor, sweep.donor_evals[donor.name], sweep_dir, cuda)["status"] == "done"
    for spec in sweep.trials:
        row = run_trial(dataclasses.replace(spec, n_eval_robust=16), sweep_dir, device=cuda)
        assert row["status"] == "done", row.get("error")
        assert row["device"].startswith("cuda")
