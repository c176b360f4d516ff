"""GPU path: a stitching trial on CUDA with bf16 and channels-last. Skipped without CUDA."""

import copy
import dataclasses

import pytest
import torch

from sweep.config.space import parse_space
from sweep.kinds.donor.run import run_donor
from sweep.kinds.trial.run import run_trial
from sweep.store.results import SweepDir
from tests.conftest import TINY_SPACE

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.ray
@pytest.mark.slow
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


@pytest.mark.parametrize("bf16", [False, True])
def test_a_captured_step_replays_the_eager_step(bf16):
    """`GraphedStep` against eager steps on a copy of the same model and optimiser, batch by batch: the same
    kernels on the same values, so each step's loss and the weights after the last agree to rounding (cuDNN's
    backward may sum in another order; a small learning rate keeps 12 steps from amplifying it), through a
    change of learning rate (captured again) and a smaller batch (eager). bf16 with channels-last: the
    tolerance of bfloat16's 8-bit mantissa."""
    from sweep.models.base import build
    from sweep.train.loops import GraphedStep, autocast, optimiser_step
    from sweep.train.optimizers import make_optimizer

    cuda = torch.device("cuda")
    torch.manual_seed(0)
    model = build("resnet_tiny", 1, 10, (0.5,), (0.25,), image_size=28).to(cuda)
    if bf16:
        model = model.to(memory_format=torch.channels_last)
    twin = copy.deepcopy(model)
    opts = [make_optimizer("sgd_nesterov", m.parameters(), 0.01, 0.9, 1e-4) for m in (model, twin)]
    ce = torch.nn.CrossEntropyLoss()
    precision = "bf16" if bf16 else "fp32"

    def loss_of(net, cache):
        def loss(x, y):
            with autocast(cuda, precision, cache=cache):
                return ce(net(x), y)

        return loss

    step = GraphedStep(loss_of(model, False), opts[0], cuda)
    gen = torch.Generator().manual_seed(1)
    rel = 2e-2 if bf16 else 1e-4
    for i in range(12):
        n = 20 if i == 9 else 32
        x = torch.rand(n, 1, 28, 28, generator=gen).to(cuda)
        y = torch.randint(0, 10, (n,), generator=gen).to(cuda)
        if bf16:
            x = x.contiguous(memory_format=torch.channels_last)
        if i == 7:
            for o in opts:
                o.param_groups[0]["lr"] = 0.001
        got = step(x, y)
        want = optimiser_step(opts[1], loss_of(twin, True)(x, y))
        assert float(got) == pytest.approx(float(want), rel=rel), i
    assert step.graph is not None and step.key[3] == (0.001,)  # captured, and again after the change of rate
    for (name, a), b in zip(model.state_dict().items(), twin.state_dict().values()):
        if a.is_floating_point():
            torch.testing.assert_close(a, b, rtol=rel, atol=rel / 10, msg=name)
