"""Stitching objectives: how a stitching layer's parameters are found. One registry entry each.

An objective's `fit(ctx)` trains or solves the stitcher in place and returns a dict of extra metrics plus a
list of curve points. `fields` names the TrialSpec fields it reads; the others are blanked when the search
space is expanded, so that e.g. changing the task-loss learning rate does not change (and rerun) DM trials.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

from .data import Splits, batches
from .evaluate import predict
from .stitching import positions
from .training import DivergedError, autocast, optimiser_step, step_schedule, to_device

__all__ = ["OBJECTIVES", "DivergedError", "FitContext", "Objective", "register_objective"]


@dataclass
class FitContext:
    front: nn.Module
    end: nn.Module
    stitcher: nn.Module
    splits: Splits
    spec: "object"  # the TrialSpec; typed loosely to keep this module free of spec imports
    device: torch.device
    end_front: nn.Module | None = None  # g<=j: the end model's own front half (needed by direct matching)
    curves: list[tuple[int, str, float]] = field(default_factory=list)


@dataclass(frozen=True)
class Objective:
    name: str
    fit: Callable[[FitContext], dict]
    fields: frozenset[str]
    description: str


OBJECTIVES: dict[str, Objective] = {}


def register_objective(name: str, fields: set[str], description: str):
    def wrap(fn: Callable[[FitContext], dict]) -> Callable[[FitContext], dict]:
        if name in OBJECTIVES:
            raise ValueError(f"objective {name!r} is registered twice")
        OBJECTIVES[name] = Objective(name, fn, frozenset(fields), description)
        return fn

    return wrap


def set_donor_mode(ctx: FitContext) -> None:
    """Donor parameters never train; `donor_bn` says whether their BatchNorm statistics may move."""
    update = ctx.spec.donor_bn == "update"
    for half in (ctx.front, ctx.end):
        half.train(update)
        for p in half.parameters():
            p.requires_grad_(False)


@register_objective(
    "tlm",
    {"epochs", "lr", "batch_size", "init", "donor_bn", "seed"},
    "task loss matching (seed 000 Eq. 1): cross-entropy of the stitched net, Adam, lr/10 at 1/3 and 2/3",
)
def fit_task_loss(ctx: FitContext) -> dict:
    spec = ctx.spec
    set_donor_mode(ctx)
    ctx.stitcher.train()
    opt = torch.optim.Adam(ctx.stitcher.parameters(), lr=spec.lr)
    sched = step_schedule(opt, spec.epochs)
    gen = torch.Generator().manual_seed(spec.seed)
    loss_fn = nn.CrossEntropyLoss()
    train_loss = math.nan
    for epoch in range(1, spec.epochs + 1):
        total, n = 0.0, 0
        for xb, yb in batches(ctx.splits.train_x, ctx.splits.train_y, spec.batch_size, gen):
            xb, yb = to_device(xb, ctx.device, spec.channels_last), yb.to(ctx.device)
            with autocast(ctx.device, spec.precision):
                with torch.no_grad():  # the front is frozen: no graph through it
                    a = ctx.front(xb)
                loss = loss_fn(ctx.end(ctx.stitcher(a)), yb)
            total += optimiser_step(opt, loss, f"task loss, epoch {epoch}") * len(yb)
            n += len(yb)
        sched.step()
        train_loss = total / n
        ctx.curves.append((epoch, "train_loss", train_loss))
        was_training = [m.training for m in (ctx.front, ctx.end, ctx.stitcher)]
        for m in (ctx.front, ctx.end, ctx.stitcher):
            m.eval()
        val_pred = predict(lambda x: ctx.end(ctx.stitcher(ctx.front(x))), ctx.splits.val_x, ctx.device,
                           precision=spec.precision, channels_last=spec.channels_last)
        val_acc = float((val_pred == ctx.splits.val_y).float().mean()) if len(val_pred) else math.nan
        for m, t in zip((ctx.front, ctx.end, ctx.stitcher), was_training):
            m.train(t)
        ctx.curves.append((epoch, "val_acc", val_acc))
    return {"final_train_loss": train_loss}


@register_objective(
    "dm",
    {"dm_samples"},
    "direct matching (seed 004 Eq. 2-3): least squares by pseudo-inverse over K training images",
)
def fit_direct_matching(ctx: FitContext) -> dict:
    spec = ctx.spec
    if ctx.end_front is None:
        raise ValueError("direct matching needs the end model's front half g<=j")
    k = spec.dm_samples
    # Fitted on the first K images of the (already shuffled) training split, never on evaluation data.
    x = ctx.splits.train_x[:k].to(ctx.device)
    for m in (ctx.front, ctx.end_front):
        m.eval()
    with torch.no_grad():
        src = ctx.front(x)
        tgt = ctx.end_front(x)
    same_positions = src.shape[2:] == tgt.shape[2:] if src.dim() == 4 else src.shape[1] == tgt.shape[1]
    if src.dim() != tgt.dim() or not same_positions:
        raise ValueError(
            f"direct matching: source positions {tuple(src.shape[1:])} do not match target"
            f" {tuple(tgt.shape[1:])}"
        )
    a = positions(src).double()
    b = positions(tgt).double()
    a1 = torch.cat([a, torch.ones(len(a), 1, dtype=a.dtype, device=a.device)], dim=1)
    theta = torch.linalg.pinv(a1) @ b  # (C_in + 1, C_out)
    if not torch.isfinite(theta).all():
        raise DivergedError("direct matching solution is not finite")
    residual = (torch.linalg.norm(a1 @ theta - b) / torch.linalg.norm(b)).item()
    ctx.stitcher.set_affine(theta[:-1].T.float(), theta[-1].float())
    return {"dm_residual": residual}
