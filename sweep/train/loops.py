"""The pieces every training loop here shares: the papers' step schedule and a guarded optimiser step."""

from __future__ import annotations

import math

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


def optimiser_step(opt: torch.optim.Optimizer, loss: torch.Tensor) -> torch.Tensor:
    """Backpropagate `loss` and step; returns the loss, detached. It does not read the loss's value: reading it
    (`.item()`, `float()`, or `if` on a tensor) waits for the device, once per step. `EpochLoss` sums the losses on
    the device and refuses a non-finite one when the epoch's mean is read."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.detach()


class EpochLoss:
    """The mean of an epoch's batch losses, weighted by batch size, summed in float64 where the losses are (on
    the device: nothing waits for it until `mean` reads the sum, once an epoch)."""

    def __init__(self, where: str):
        self.where = where
        self.total: torch.Tensor | None = None
        self.n = 0

    def add(self, loss: torch.Tensor, n: int) -> None:
        value = loss.detach().double() * n
        self.total = value if self.total is None else self.total + value
        self.n += n

    def mean(self) -> float:
        """The epoch's mean loss; `DivergedError` when some batch's loss was NaN or infinite (the sum is then
        non-finite too: steps after it ran, and the trial fails at the epoch's end instead of at that step)."""
        value = float(self.total) / self.n if self.n else math.nan
        if not math.isfinite(value):
            raise DivergedError(f"{self.where}: loss became {value}")
        return value


def autocast(device: torch.device, precision: str, cache: bool = True):
    """bf16 autocast on `device` when `precision` is "bf16"; a no-op context for "fp32". `cache=False` inside a
    captured CUDA graph (autocast's cache of cast weights must not outlive the capture)."""
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=precision == "bf16",
                          cache_enabled=cache)  # fmt: skip


class GraphedStep:
    """A training step (`loss_fn(x, y)`, its backward and the optimiser's step) captured once as a CUDA graph
    and replayed for every later batch of the same shape: at 28-32 px a ResNet-18 step is a few hundred small
    kernels, and launching them from Python took longer than running them (10 ms a step on an H200 whatever the
    precision, `tests/benchmarks/donor_step.py`). The batch is copied into the graph's own input tensors; a batch
    of another shape (an epoch's last) runs eagerly. The first `WARMUP` full batches run eagerly on a side stream
    (the optimiser's state and cuDNN's choices exist before capture), and a change of learning rate (a step
    schedule) captures again, since the graph holds the rate it was captured with (more than `MAX_CAPTURES`
    changes: eager from then on). On a CPU every step is eager.
    The arithmetic is the eager step's, kernel for kernel; only when it is launched differs."""

    WARMUP = 3
    MAX_CAPTURES = 8  # a schedule that changes the rate more often than this runs eagerly from then on

    def __init__(self, loss_fn, opt: torch.optim.Optimizer, device: torch.device):
        self.loss_fn, self.opt = loss_fn, opt
        self.enabled = device.type == "cuda"
        self.graph: torch.cuda.CUDAGraph | None = None
        self.key: tuple | None = None
        self.eager_steps = 0
        self.captures = 0

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return optimiser_step(self.opt, self.loss_fn(x, y))
        key = (x.shape, x.stride(), y.shape, tuple(g["lr"] for g in self.opt.param_groups))
        if self.graph is not None and key[:3] != self.key[:3]:
            return optimiser_step(self.opt, self.loss_fn(x, y))  # another shape: eagerly
        if self.graph is None and self.eager_steps < self.WARMUP:
            self.eager_steps += 1
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                loss = optimiser_step(self.opt, self.loss_fn(x, y))
            torch.cuda.current_stream().wait_stream(side)
            return loss
        if key != self.key:
            if self.captures == self.MAX_CAPTURES:  # a rate that keeps changing: capture costs more than it saves
                self.enabled, self.graph = False, None
                return optimiser_step(self.opt, self.loss_fn(x, y))
            self._capture(x, y)
            self.key = key
            self.captures += 1
        self.x.copy_(x)
        self.y.copy_(y)
        self.graph.replay()
        return self.loss

    def _capture(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.graph = None  # the previous graph's memory goes back first
        self.x, self.y = x.clone(), y.clone()  # clone keeps x's memory format (channels-last)
        self.opt.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            loss = self.loss_fn(self.x, self.y)
            loss.backward()
            self.opt.step()
            self.loss = loss.detach()
        self.graph = graph


def to_device(x: torch.Tensor, device: torch.device, channels_last: bool = False) -> torch.Tensor:
    """Move a batch to `device`, in channels-last memory format when asked (4-D image batches only)."""
    if channels_last and x.dim() == 4:
        return x.to(device, memory_format=torch.channels_last)
    return x.to(device)
