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
    row = run_donor(sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, cuda)
    assert row["status"] == "done", row.get("error")
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
        row = run_donor(donor, sweep.donor_evals[donor.name], sweep_dir, cuda)
        assert row["status"] == "done", row.get("error")
    for spec in sweep.trials:
        row = run_trial(dataclasses.replace(spec, n_eval_robust=16), sweep_dir, device=cuda)
        assert row["status"] == "done", row.get("error")
        assert row["device"].startswith("cuda")


def test_quarter_gpu_trials_share_the_device_under_ray(tmp_path, write_space):
    """`gpus_per_trial: 0.25`: Ray places up to four trials on the one GPU at once; every trial runs on it."""
    import subprocess
    import sys

    import analysis

    space = copy.deepcopy(TINY_SPACE)
    space["resources"] = {"cpus_per_trial": 1, "gpus_per_trial": 0.25}
    space["stitching"]["stitch_points"] = "all"
    proc = subprocess.run(
        [sys.executable, "-m", "sweep", "run", str(write_space(space)), "--storage", str(tmp_path), "--num-cpus", "4"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    trials = analysis.load_trials(tmp_path / "tiny")
    assert (trials["status"] == "done").all() and trials["device"].str.startswith("cuda").all()
