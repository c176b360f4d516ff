"""Donor training (Balogh & Jelasity 2023 A.2-A.3) and the registry of training methods.

Plain training: SGD with Nesterov momentum 0.9, weight decay 1e-4, learning rate divided by 10 at 1/3 and 2/3
of the epochs, optional crop / flip / affine augmentation. A training method is one registered entry: the
loss of a batch, and the donor fields it reads (a field no method of the donor reads is refused when the
search space is read).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from sweep.data.augment import augment
from sweep.data.core import Splits, batches
from sweep.models.base import StagedNet, build
from sweep.registry import TRAINING_METHODS
from sweep.train.attacks import pgd_linf, trades_linf, trades_loss
from sweep.train.loops import optimiser_step, step_schedule

_ce = nn.CrossEntropyLoss()


@dataclass(frozen=True)
class TrainingMethod:
    name: str
    loss: Callable  # (model, xb, yb, donor, generator) -> loss; leaves the model in train mode
    fields: frozenset[str]  # the adversarial donor fields it reads
    description: str


def register_training_method(name: str, fields: set[str], description: str):
    return TRAINING_METHODS.register(name, lambda fn: TrainingMethod(name, fn, frozenset(fields), description))


@register_training_method("plain", set(), "cross-entropy on clean batches (Balogh & Jelasity 2023 A.2)")
def _plain(model, xb, yb, donor, gen):
    model.train()
    return _ce(model(xb), yb)


@register_training_method(
    "pgd",
    {"eps", "step_size", "steps", "adv_fraction"},
    "L-inf PGD adversarial training (Madry et al.; Balogh & Jelasity 2023 A.3); adv_fraction weighs the"
    " adversarial loss against the clean one",
)
def _pgd(model, xb, yb, donor, gen):
    model.eval()  # craft the attack with frozen BatchNorm statistics, then train on it
    x_adv = pgd_linf(model, xb, yb, donor.eps, donor.step_size, donor.steps, generator=gen)
    model.train()
    loss = donor.adv_fraction * _ce(model(x_adv), yb)
    if donor.adv_fraction < 1.0:
        loss = loss + (1 - donor.adv_fraction) * _ce(model(xb), yb)
    return loss


@register_training_method(
    "trades",
    {"eps", "step_size", "steps", "beta"},
    "TRADES (Zhang et al.; Balogh & Jelasity 2023 Eq. 4): CE + beta KL(p(x) || p(x')), KL-PGD for x'",
)
def _trades(model, xb, yb, donor, gen):
    model.eval()
    x_adv = trades_linf(model, xb, donor.eps, donor.step_size, donor.steps, generator=gen)
    model.train()
    return trades_loss(model, xb, yb, x_adv, donor.beta)


def train_donor(
    donor, splits: Splits, device: torch.device, progress: Callable[[dict], None] | None = None
) -> StagedNet:
    """Train a zoo donor (a `DonorSpec`) from scratch; returns it in eval mode."""
    torch.manual_seed(donor.seed)
    model = build(
        donor.arch, splits.in_channels, splits.num_classes, splits.mean, splits.std, image_size=splits.image_size
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=donor.lr, momentum=0.9, nesterov=True, weight_decay=1e-4)
    sched = step_schedule(opt, donor.epochs)
    gen = torch.Generator().manual_seed(donor.seed)
    method = TRAINING_METHODS.get_entry(donor.training)
    for epoch in range(1, donor.epochs + 1):
        total, n = 0.0, 0
        for xb, yb in batches(splits.train_x, splits.train_y, donor.batch_size, gen):
            if donor.augment:
                xb = augment(xb, donor.augment, gen)
            xb, yb = xb.to(device), yb.to(device)
            loss = method.loss(model, xb, yb, donor, gen)
            total += optimiser_step(opt, loss, f"donor {donor.name}, epoch {epoch}") * len(yb)
            n += len(yb)
        sched.step()
        if progress is not None:
            progress({"phase": "zoo", "epoch": epoch, "epochs": donor.epochs, "train_loss": total / n})
    model.eval()
    return model


def build_zoo_donor(donor, splits: Splits, device: torch.device, progress: Callable[[dict], None] | None = None):
    """The `zoo:` donor source: trained here, normalised with its training data's statistics."""
    return train_donor(donor, splits, device, progress), splits.mean, splits.std
