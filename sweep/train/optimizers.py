"""The optimisers and learning-rate schedules that donors and stitchers train with: one registered entry each
(`OPTIMIZERS`, `SCHEDULES`), chosen by name in the search space.

- `sgd_nesterov`: SGD with Nesterov momentum (Balogh & Jelasity 2023 A.2's donors; the donors' default).
- `sgd`: SGD with (heavy-ball) momentum (Smith & Marcu 2024 B.1 and C.2, for models and stitchers).
- `adam`: Adam (Balogh & Jelasity 2023 A.5's stitchers; the stitchers' default).
- `adamw`: AdamW (Loshchilov & Hutter 2019), weight decay decoupled from the gradient: the usual optimiser of
  ViTs (Balogh & Jelasity 2025's ViT-Ti donors; their recipe is in an unavailable supplement).
Weight decay is L2 added to the gradient in the other three (torch's `weight_decay`).

Schedules: `step` divides the learning rate by 10 at 1/3 and 2/3 of the epochs (Balogh & Jelasity 2023 A.2);
`constant` keeps it (Smith & Marcu 2024, which states no schedule); `warmup_cosine` rises linearly over the
first 5% of the epochs (at least one) and then decays along a cosine to zero (the ViT recipe);
`batch_steps_100_150` divides it by 10 after the 100th and after the 150th optimiser step (Smith & Marcu 2024's
code: `MultiStepLR([100, 150])` stepped per batch, so the rate is 1/100 of `lr` from the 151st batch on).
"""

from __future__ import annotations

import math

import torch

from sweep.registry import OPTIMIZERS, SCHEDULES
from sweep.train.declared import Optimizer, register_optimizer  # noqa: F401  (re-exported)
from sweep.train.loops import BatchMilestones, step_schedule  # noqa: F401  (step_schedule: the `step` schedule)


def sgd_nesterov(params, lr: float, momentum: float, wd: float) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=lr, momentum=momentum, nesterov=True, weight_decay=wd)


def sgd(params, lr: float, momentum: float, wd: float) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=wd)


def adam(params, lr: float, momentum: float, wd: float) -> torch.optim.Optimizer:
    return torch.optim.Adam(params, lr=lr, weight_decay=wd)


def adamw(params, lr: float, momentum: float, wd: float) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=lr, weight_decay=wd)


def warmup_cosine_factor(epoch: int, epochs: int) -> float:
    """The learning-rate factor of epoch `epoch` (0-based) of `epochs`: (epoch + 1) / w over the first w =
    max(1, ceil(epochs / 20)) epochs, then 0.5 (1 + cos(pi (epoch - w) / (epochs - w)))."""
    warm = max(1, math.ceil(epochs / 20))
    if epoch < warm:
        return (epoch + 1) / warm
    return 0.5 * (1.0 + math.cos(math.pi * (epoch - warm) / max(1, epochs - warm)))


def warmup_cosine_schedule(opt, epochs: int):
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: warmup_cosine_factor(epoch, epochs))


def constant_schedule(opt, epochs: int):
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 1.0)


def batch_steps_100_150_schedule(opt, epochs: int):
    return BatchMilestones(opt, milestones=[100, 150], gamma=0.1)


def make_optimizer(name: str, params, lr: float, momentum: float | None, weight_decay: float):
    """The registered optimiser `name` over `params`."""
    return OPTIMIZERS.get_entry(name).build(params, lr, momentum, weight_decay)


def make_schedule(name: str, opt: torch.optim.Optimizer, epochs: int) -> torch.optim.lr_scheduler.LRScheduler:
    """The registered schedule `name` (stepped once per epoch, or per batch where it says so, `schedule_step`;
    every one has a state to resume from)."""
    return SCHEDULES.get_entry(name)(opt, epochs)
