"""Stitching objectives: how a stitching layer's parameters are found. One registry entry each.

An objective's `fit(ctx)` trains or solves the stitcher in place and returns a dict of extra metrics plus a
list of curve points. `fields` names the TrialSpec fields it reads; the others are blanked when the search
space is expanded, so that e.g. changing the task-loss learning rate does not change (and rerun) DM trials.

Gradient objectives share one loop (`_fit_by_gradient`), by default Adam with A.2's step schedule, donors frozen:
- `tlm`: Balogh & Jelasity 2023 Eq. 1, cross-entropy of the stitched network.
- `adv`: Balogh & Jelasity 2023 Eq. 2, `(1 - alpha) * CE(clean) + alpha * CE(PGD)` on every batch.
- `adv_mix`: the published reference code's variant: a fraction alpha of each batch is replaced by PGD
  examples and one cross-entropy is taken over the mixed batch (Eq. 2 only in expectation).
- `trades`: Balogh & Jelasity 2023 Eq. 5, `CE(clean) + beta * KL(p(x) || p(x'))` with TRADES' KL inner maximisation.
`init: dm` first solves the stitcher by direct matching (any gradient objective); `dm+tlm` (Balogh & Jelasity 2025 3.1)
always does, then trains with the task loss.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from sweep.data.core import Splits, batches
from sweep.measures.least_squares import NormalEquations
from sweep.registry import OBJECTIVES
from sweep.stitching.declared import Objective, register_objective  # noqa: F401  (re-exported)
from sweep.stitching.stitcher import positions
from sweep.train.attacks import pgd_linf, trades_linf, trades_loss
from sweep.train.evaluate import accuracy, predict
from sweep.train.loops import (
    DivergedError,
    EpochLoss,
    autocast,
    float32_value,
    optimiser_step,
    schedule_step,
    to_device,
)
from sweep.train.optimizers import make_optimizer, make_schedule
from sweep.worker.activations import Frozen, chunks

__all__ = [
    "OBJECTIVES",
    "DivergedError",
    "FitContext",
    "Objective",
    "register_objective",
    "adv_loss",
    "trades_loss",
    "direct_match",
]

HEARTBEAT_S = 30.0  # a fitting stitcher reports an epoch line at most this often (one Tune report each)


@dataclass
class FitContext:
    front: nn.Module
    end: nn.Module
    stitcher: nn.Module
    splits: Splits
    spec: object  # the TrialSpec; typed loosely to keep this module free of spec imports
    device: torch.device
    end_front: nn.Module | None = None  # g<=j: the end model's own front half (needed by direct matching)
    curves: list[tuple[int, str, float]] = field(default_factory=list)
    report: Callable[[dict], None] | None = None  # a heartbeat per epoch (the sweep's progress display)
    # the frozen halves' activations on the splits (`sweep.worker.activations.Frozen`); None: computed per batch
    front_acts: Frozen | None = None
    end_acts: Frozen | None = None
    end_model: nn.Module | None = None  # the whole end network (its stage names: FuLA's hint layers)

    def stitched(self, x: torch.Tensor) -> torch.Tensor:
        return self.end(self.stitcher(self.front(x)))

    def head(self, a: torch.Tensor) -> torch.Tensor:  # the stitched network after the front: g>j(T(a))
        return self.end(self.stitcher(a))

    @property
    def front_is_frozen(self) -> bool:
        """Whether f<=i(x) is a pure function of x during the fit (BatchNorm statistics do not move), so a
        gradient fit may train on its activations (computed once; kept when the cache is on)."""
        moves_bn = self.spec.donor_bn == "update"  # blanked (None) for objectives that train nothing
        return bool(self.front_acts and self.front_acts.cached) and not moves_bn

    @property
    def params(self) -> dict:
        """The objective's own parameters (those it declares as `params`), with their defaults filled in."""
        return dict(getattr(self.spec, "params", ()))


def set_donor_mode(ctx: FitContext) -> None:
    """Donor parameters never train; `donor_bn` says whether their BatchNorm statistics may move."""
    update = ctx.spec.donor_bn == "update"
    for half in (ctx.front, ctx.end):
        half.train(update)
        for p in half.parameters():
            p.requires_grad_(False)


@contextlib.contextmanager
def eval_mode(*modules: nn.Module):
    """Every module in eval mode inside the block (attacks are crafted with fixed BatchNorm statistics and do
    not move them), the previous modes restored after."""
    before = [[m.training for m in module.modules()] for module in modules]
    for module in modules:
        module.eval()
    try:
        yield
    finally:
        for module, flags in zip(modules, before):
            for m, flag in zip(module.modules(), flags):
                m.training = flag


# ------------------------------------------------------------------------------------------ batch losses

_ce = nn.CrossEntropyLoss()


def adv_loss(net: Callable, x: torch.Tensor, y: torch.Tensor, x_adv: torch.Tensor | None, alpha: float) -> torch.Tensor:
    """Balogh & Jelasity 2023 Eq. 2 on one batch. A term with weight 0 is not computed (`x_adv` may then be None)."""
    loss = torch.zeros((), device=x.device)
    if alpha < 1.0:
        loss = loss + (1.0 - alpha) * _ce(net(x), y)
    if alpha > 0.0:
        loss = loss + alpha * _ce(net(x_adv), y)
    return loss


def adv_mix_loss(
    net: Callable, x: torch.Tensor, y: torch.Tensor, x_adv: torch.Tensor | None, alpha: float
) -> torch.Tensor:
    """The reference code's variant: the first round(alpha * B) examples of the batch replaced by their
    adversarial versions (`x_adv` holds exactly those), one cross-entropy over the mixed batch."""
    k = adv_mix_count(len(y), alpha)
    mixed = torch.cat([x_adv, x[k:]]) if k else x
    return _ce(net(mixed), y)


def adv_mix_count(batch: int, alpha: float) -> int:
    return int(round(alpha * batch))


# ---------------------------------------------------------------------------------------- the fit loop


def _fit_by_gradient(
    ctx: FitContext,
    batch_loss: Callable[[torch.Tensor, torch.Tensor, torch.Generator], torch.Tensor],
    on_features: bool = False,
    train_y: torch.Tensor | None = None,
) -> dict:
    """The spec's optimiser on the stitcher's parameters (default: Adam with A.2's weight decay and step
    schedule, Balogh & Jelasity 2023 A.5); `batch_loss(x, y, generator)` gives the loss. With `on_features`
    its `x` are the front's cached activations f<=i(x) (train, and val for the per-epoch accuracy) instead
    of images: the same batches, in the same order, without the front's forward passes. `train_y`: what
    `batch_loss` gets as `y` instead of the labels (the images' indices, for targets of their own)."""
    spec = ctx.spec
    out = _initialise(ctx)
    set_donor_mode(ctx)
    ctx.stitcher.train()
    opt = make_optimizer(spec.optimizer, ctx.stitcher.parameters(), spec.lr, spec.momentum, spec.weight_decay)
    sched = make_schedule(spec.lr_schedule, opt, spec.epochs)
    gen = torch.Generator().manual_seed(spec.seed)
    last_beat = time.monotonic()
    train_loss = math.nan
    if on_features:
        train_x = ctx.front_acts.on("train", precision=spec.precision)
        val_x, net = ctx.front_acts.on("val", precision=spec.precision), ctx.head
    else:
        train_x, val_x, net = ctx.splits.train_x, ctx.splits.val_x, ctx.stitched
    for epoch in range(1, spec.epochs + 1):
        losses = EpochLoss(f"{spec.objective}, epoch {epoch}")
        labels = ctx.splits.train_y if train_y is None else train_y
        for xb, yb in batches(train_x, labels, spec.batch_size, gen):
            xb, yb = to_device(xb, ctx.device, spec.channels_last), yb.to(ctx.device)
            with autocast(ctx.device, spec.precision):
                loss = batch_loss(xb, yb, gen)
            losses.add(optimiser_step(opt, loss), len(yb))
            schedule_step(sched, "batch")
        schedule_step(sched, "epoch")
        train_loss = float32_value(losses.mean())
        ctx.curves.append((epoch, "train_loss", train_loss))
        if ctx.report is not None and time.monotonic() - last_beat >= HEARTBEAT_S:  # alive, not chatty
            ctx.report({"phase": "fit", "epoch": epoch, "epochs": spec.epochs, "train_loss": train_loss})
            last_beat = time.monotonic()
        with eval_mode(ctx.front, ctx.end, ctx.stitcher):
            val_pred = predict(net, val_x, ctx.device, precision=spec.precision, channels_last=spec.channels_last)
        val_acc = accuracy(val_pred, ctx.splits.val_y) if len(val_pred) else math.nan
        ctx.curves.append((epoch, "val_acc", val_acc))
    out["final_train_loss"] = train_loss
    return out


def _initialise(ctx: FitContext) -> dict:
    """`init: dm` (and `dm+tlm`) solve the stitcher by direct matching before training (random / identity:
    set when the stitcher is built)."""
    return direct_match(ctx) if ctx.spec.init == "dm" or OBJECTIVES[ctx.spec.objective].dm_init else {}


def _head(ctx: FitContext, a: torch.Tensor) -> torch.Tensor:
    return ctx.end(ctx.stitcher(a))


def _features(ctx: FitContext, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():  # the front is frozen: no graph through it for the training loss
        return ctx.front(x)


def _pgd(ctx: FitContext, x: torch.Tensor, y: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    spec = ctx.spec
    with eval_mode(ctx.front, ctx.end, ctx.stitcher):
        return pgd_linf(
            ctx.stitched,
            x,
            y,
            spec.adv_eps,
            spec.adv_step_size,
            spec.adv_steps,
            random_start=spec.adv_random_start,
            generator=gen,
        )


def fit_task_loss(ctx: FitContext) -> dict:
    if ctx.front_is_frozen and all(ctx.front_acts.fits(p, ctx.spec.precision) for p in ("train", "val")):
        return _fit_by_gradient(ctx, lambda a, y, gen: _ce(ctx.head(a), y), on_features=True)

    def loss(x, y, gen):
        return _ce(_head(ctx, _features(ctx, x)), y)

    return _fit_by_gradient(ctx, loss)


def fit_adversarial(ctx: FitContext) -> dict:
    alpha = ctx.spec.alpha

    def loss(x, y, gen):
        x_adv = _pgd(ctx, x, y, gen) if alpha > 0 else None
        return adv_loss(lambda inp: _head(ctx, _features(ctx, inp)), x, y, x_adv, alpha)

    return _fit_by_gradient(ctx, loss)


def fit_adversarial_mixed(ctx: FitContext) -> dict:
    alpha = ctx.spec.alpha

    def loss(x, y, gen):
        k = adv_mix_count(len(y), alpha)
        x_adv = _pgd(ctx, x[:k], y[:k], gen) if k else None
        return adv_mix_loss(lambda inp: _head(ctx, _features(ctx, inp)), x, y, x_adv, alpha)

    return _fit_by_gradient(ctx, loss)


def fit_trades(ctx: FitContext) -> dict:
    spec = ctx.spec

    def loss(x, y, gen):
        x_adv = None
        if spec.beta > 0:
            with eval_mode(ctx.front, ctx.end, ctx.stitcher):
                x_adv = trades_linf(ctx.stitched, x, spec.adv_eps, spec.adv_step_size, spec.adv_steps, generator=gen)
        return trades_loss(lambda inp: _head(ctx, _features(ctx, inp)), x, y, x_adv, spec.beta)

    return _fit_by_gradient(ctx, loss)


# ------------------------------------------------------------------------------------- direct matching


def direct_match(ctx: FitContext) -> dict:
    """Solve the stitcher by least squares (float64) from f<=i to g<=j activations over the first K training
    images (Balogh & Jelasity 2025 Eq. 2-3); returns the normalised residual ||A theta - B|| / ||B|| and the
    condition number of the (centred) A.

    The normal equations are accumulated chunk by chunk (`NormalEquations`), so K is bounded by time, not
    memory: one chunk of activations is held at a time unless the worker keeps the part anyway. The residual
    is a second pass over the same chunks (exact, where a closed form from the sums would lose its last eight
    digits to cancellation). For the `bn_affine_bn` stitcher the BatchNorms are set to the source and target
    statistics and the map is solved in standardised coordinates."""
    spec = ctx.spec
    if ctx.end_front is None:
        raise ValueError("direct matching needs the end model's front half g<=j")
    n_train = len(ctx.splits.train_x)
    k = n_train if spec.dm_samples is None else min(spec.dm_samples, n_train)  # None: every training image
    stitcher = ctx.stitcher
    bn = getattr(stitcher, "kind", "affine") == "bn_affine_bn"
    sums = NormalEquations()
    for a, b in _dm_rows(ctx, k):
        sums.update(a, b)
    if sums.shift_a is None:
        raise ValueError(f"dm_samples: K={spec.dm_samples}, but the training split holds no images to fit on")
    per_image = sums.n // max(1, k)
    if sums.n < sums.aa.shape[0] + 1:
        needed = math.ceil((sums.aa.shape[0] + 1) / max(1, per_image))
        raise ValueError(
            f"dm_samples: K={k} images give {sums.n} rows for {sums.aa.shape[0] + 1} unknowns per"
            f" output channel; a determined least-squares fit needs K >= {needed}"
        )
    mean_a, mean_b = sums.means()
    scale_a = scale_b = None
    if bn:
        s_var, t_var = sums.variances()
        t_var = t_var.clamp_min(1e-12)
        stitcher.set_normalisation(mean_a.float(), s_var.float(), mean_b.float(), t_var.float())
        scale_a = 1.0 / (s_var + stitcher.bn_in.eps).sqrt()
        scale_b = math.sqrt(1.0 + stitcher.bn_out.eps) / t_var.sqrt()  # what the output BatchNorm inverts
    fit = sums.solve(scale_a, scale_b)
    if not (torch.isfinite(fit.weight).all() and torch.isfinite(fit.bias).all()):
        raise DivergedError("direct matching solution is not finite")
    err = total = 0.0
    for a, b in _dm_rows(ctx, k):
        if bn:
            a, b = (a - mean_a) * scale_a, (b - mean_b) * scale_b
        err += float(((a @ fit.weight + fit.bias - b) ** 2).sum())
        total += float((b * b).sum())
    stitcher.set_affine(fit.weight.T.float(), fit.bias.float())
    return {"dm_residual": math.sqrt(err / total) if total > 0 else math.inf, "dm_condition": fit.condition}


def _dm_rows(ctx: FitContext, k: int):
    """(A, B) row blocks of the first k training images, chunk by chunk: the source activations (resized as a
    cross-layer stitcher sees them) and the target's, one row per position (`positions`), in float64.
    Fitted on the first K images of the (already shuffled) training split, never on evaluation data."""
    x = ctx.splits.train_x
    with eval_mode(ctx.front, ctx.end_front), torch.no_grad():
        fronts = chunks(ctx.front_acts, ctx.front, x, "train", k, ctx.device)
        ends = chunks(ctx.end_acts, ctx.end_front, x, "train", k, ctx.device)
        for src, tgt in zip(fronts, ends):
            if hasattr(ctx.stitcher, "resize"):  # cross-layer: the map sees source maps at the target's size
                src = ctx.stitcher.resize(src)
            if src.dim() == 2:  # vectors: one position each
                same_positions = True
            else:
                same_positions = src.shape[2:] == tgt.shape[2:] if src.dim() == 4 else src.shape[1] == tgt.shape[1]
            if src.dim() != tgt.dim() or not same_positions:
                raise ValueError(
                    f"direct matching: source positions {tuple(src.shape[1:])} do not match target"
                    f" {tuple(tgt.shape[1:])}"
                )
            yield positions(src).double(), positions(tgt).double()
