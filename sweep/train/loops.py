"""The pieces every training loop here shares: the papers' step schedule and a guarded optimiser step."""

from __future__ import annotations

import torch


class DivergedError(FloatingPointError):
    """A loss or solution became NaN or infinite: the trial is recorded as failed with this reason."""


def step_schedule(opt: torch.optim.Optimizer, epochs: int) -> torch.optim.lr_scheduler.MultiStepLR:
    """Learning rate divided by 10 at 1/3 and 2/3 of the epochs (Balogh & Jelasity 2023 A.2, also for stitchers,
    A.5)."""
    milestones = sorted({max(1, round(epochs / 3)), max(1, round(2 * epochs / 3))})
    return torch.optim.lr_scheduler.MultiStepLR(opt, milestones=milestones, gamma=0.1)


class BatchMilestones(torch.optim.lr_scheduler.MultiStepLR):
    """`MultiStepLR` counted in optimiser steps, not epochs: the training loops step it after every batch
    (`schedule_step`). Smith & Marcu's code trains its models with `MultiStepLR([100, 150])` stepped so."""

    per_batch = True


def schedule_step(sched: torch.optim.lr_scheduler.LRScheduler, after: str) -> None:
    """Step `sched` at the end of a batch (`after="batch"`) or of an epoch (`"epoch"`), whichever it counts."""
    if getattr(sched, "per_batch", False) == (after == "batch"):
        sched.step()


def float32_value(x: float) -> float:
    """A mean of float32 losses as the float32 precision it carries: the shortest decimal that float32 reads
    back (0.1234568, not 0.12345678918063641), so the results hold no spurious digits."""
    import numpy as np

    return float(str(np.float32(x)))


def optimiser_step(opt: torch.optim.Optimizer, loss: torch.Tensor, where: str) -> float:
    """Backpropagate `loss` and step, refusing a non-finite loss; returns the loss value."""
    value = loss.item()
    if not torch.isfinite(loss):
        raise DivergedError(f"{where}: loss became {value}")
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return value


def autocast(device: torch.device, precision: str):
    """bf16 autocast on `device` when `precision` is "bf16"; a no-op context for "fp32"."""
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


def to_device(x: torch.Tensor, device: torch.device, channels_last: bool = False) -> torch.Tensor:
    """Move a batch to `device`, in channels-last memory format when asked (4-D image batches only)."""
    if channels_last and x.dim() == 4:
        return x.to(device, memory_format=torch.channels_last)
    return x.to(device)
