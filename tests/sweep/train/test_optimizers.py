"""The optimiser registry shared by donors and stitchers (Smith & Marcu 2024 B.1 and C.2 train both with SGD,
momentum 0.9, a constant learning rate): a donor's settings reach its training, and the defaults keep the
donor keys of spaces written before the settings existed."""

import copy

import pytest
import torch

import sweep.train.donors as donors_module
from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.data.core import make_splits
from sweep.train.donors import train_donor
from tests.conftest import TINY_SPACE


def _donor(**changes):
    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["plain_a"].update(changes)
    return parse_space(space).donors["plain_a"]


def test_default_settings_written_out_keep_the_donor_key_and_others_change_it():
    plain = _donor()
    explicit = _donor(optimizer="sgd_nesterov", momentum=0.9, weight_decay=1e-4, lr_schedule="step")
    assert explicit.donor_key == plain.donor_key
    assert explicit.optimiser() == {"optimizer": "sgd_nesterov", "momentum": 0.9, "weight_decay": 1e-4,
                                    "lr_schedule": "step"}  # fmt: skip
    keys = {_donor(**c).donor_key for c in ({"optimizer": "sgd"}, {"momentum": 0.5}, {"lr_schedule": "constant"})}
    assert len(keys | {plain.donor_key}) == 4
    with pytest.raises(SpecError, match=r"^donors.plain_a.momentum: expected no momentum with optimizer: adam"):
        _donor(optimizer="adam", momentum=0.5)
    with pytest.raises(SpecError, match=r"donors.plain_a.optimizer.*did you mean 'sgd'"):
        _donor(optimizer="sgdd")


@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["constant", "step"])
def test_a_donors_optimiser_and_schedule_are_the_ones_it_trains_with(monkeypatch, schedule):
    built = []
    original = donors_module.make_optimizer

    def spy(*args, **kwargs):
        built.append(original(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(donors_module, "make_optimizer", spy)
    donor = _donor(optimizer="sgd", momentum=0.5, weight_decay=0.01, lr_schedule=schedule, epochs=3, lr=0.05)
    splits = make_splits(donor.data.dataset, 200, donor.data.val_size, donor.data.test_size)
    train_donor(donor, splits, torch.device("cpu"))
    (opt,) = built
    group = opt.param_groups[0]
    assert type(opt) is torch.optim.SGD and group["momentum"] == 0.5 and not group["nesterov"]
    assert group["weight_decay"] == 0.01
    # after 3 epochs: constant keeps 0.05; step has divided by 10 at epochs 1 and 2 (1/3 and 2/3 of 3)
    assert group["lr"] == pytest.approx(0.05 if schedule == "constant" else 0.0005)


@pytest.mark.slow
def test_adamw_with_warmup_cosine_trains_a_donor_along_the_stated_curve(monkeypatch):
    """The ViT recipe: AdamW (decoupled weight decay) and a linear warm-up over 5% of the epochs (at least one),
    then a cosine to zero; the factors are worked out here by hand, and a donor trains with them."""
    import math

    from sweep.train.optimizers import warmup_cosine_factor

    # 100 epochs: 5 of warm-up (0.2, 0.4, ..., 1.0), then 0.5 (1 + cos(pi (e - 5) / 95))
    assert [warmup_cosine_factor(e, 100) for e in range(5)] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    assert warmup_cosine_factor(5, 100) == 1.0 and warmup_cosine_factor(52, 100) == pytest.approx(
        0.5 * (1 + math.cos(math.pi * 47 / 95))
    )
    assert warmup_cosine_factor(99, 100) == pytest.approx(0.5 * (1 + math.cos(math.pi * 94 / 95)))
    # 3 epochs: one of warm-up, then 0.5 (1 + cos(pi / 2)); zero only after the last epoch
    assert [warmup_cosine_factor(e, 3) for e in range(4)] == pytest.approx([1.0, 1.0, 0.5, 0.0])
    built = []
    original = donors_module.make_optimizer
    monkeypatch.setattr(donors_module, "make_optimizer", lambda *a, **k: built.append(original(*a, **k)) or built[-1])
    donor = _donor(optimizer="adamw", weight_decay=0.05, lr_schedule="warmup_cosine", epochs=3, lr=0.01)
    splits = make_splits(donor.data.dataset, 200, donor.data.val_size, donor.data.test_size)
    train_donor(donor, splits, torch.device("cpu"))
    (opt,) = built
    assert type(opt) is torch.optim.AdamW and opt.param_groups[0]["weight_decay"] == 0.05
    assert opt.param_groups[0]["lr"] == pytest.approx(0.01 * warmup_cosine_factor(3, 3))  # after the last epoch


@pytest.mark.slow
def test_batch_steps_schedule_counts_optimiser_steps_as_the_authors_code(monkeypatch):
    """Smith & Marcu's code: `MultiStepLR(milestones=[100, 150])` with `scheduler.step()` after every batch. With
    100 batches an epoch for 2 epochs the rate is lr for steps 1-100, lr/10 for 101-150, lr/100 for 151-200 (an
    epoch-stepped schedule would never reach a milestone)."""
    rates = []
    original = donors_module.optimiser_step

    def spy(opt, loss):
        rates.append(opt.param_groups[0]["lr"])
        return original(opt, loss)

    monkeypatch.setattr(donors_module, "optimiser_step", spy)
    donor = _donor(optimizer="sgd", lr_schedule="batch_steps_100_150", epochs=2, lr=0.05, batch_size=2)
    splits = make_splits(donor.data.dataset, 200, donor.data.val_size, donor.data.test_size)
    train_donor(donor, splits, torch.device("cpu"))
    assert len(rates) == 200
    assert rates == pytest.approx([0.05] * 100 + [0.005] * 50 + [0.0005] * 50)


def test_epoch_loss_is_the_size_weighted_mean_and_refuses_a_non_finite_batch():
    from sweep.train.loops import DivergedError, EpochLoss

    losses = EpochLoss("donor d, epoch 3")
    for value, n in ((2.0, 128), (1.0, 128), (4.0, 44)):
        losses.add(torch.tensor(value, dtype=torch.float32), n)
    assert losses.mean() == pytest.approx((2.0 * 128 + 1.0 * 128 + 4.0 * 44) / 300, rel=1e-12)
    losses.add(torch.tensor(float("nan")), 10)  # a later finite batch does not hide it
    losses.add(torch.tensor(1.0), 10)
    with pytest.raises(DivergedError, match=r"^donor d, epoch 3: loss became nan"):
        losses.mean()
