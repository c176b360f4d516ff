"""Objectives that train the stitcher towards the end network rather than the labels, in the shared gradient
loop (`_fit_by_gradient`: the block's optimiser, schedule, init, epochs and curves):

- `slm`: soft-label matching, Hinton et al. 2015's distillation loss on the stitch,
  `T^2 KL(softmax(z_end / T) || softmax(z_stitched / T))`, batch mean; z_end are the end network's logits on the
  same images (computed once, in eval mode, from its cached g<=j activations).
- `fula`: our reading of functional latent alignment (Athanasiadis, Karmush & Felsberg 2025): over hint layers
  k of the end network at and after the stitch point j, `sum_k w_k ||s_k - t_k||^2 / ||t_k||^2` on each batch,
  s_k the stitched network's activations at k (T(f<=i(x)) through g's layers j+1..k), t_k the end network's
  own, the weights normalised to sum to 1 (docs/design.md, departures).

Both train on the front's cached activations where the engine keeps them (as `tlm`). The end network's targets
are computed once: `slm`'s logits for every training image from its cached g<=j activations; `fula`'s hint
layers as frozen halves g<=k of the end donor, cached like any frozen half (keyed by the end donor's checkpoint
and k, so every trial into the same end network reads the same targets, from memory or the node's folder). A
hint layer whose activations on the training images exceed the worker's memory budget sends the fit back to
per-batch targets (a no-grad pass of g's layers up to the last hint).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from sweep.models.base import split
from sweep.stitching.declared import hint_layers
from sweep.stitching.objectives import FitContext, _features, _fit_by_gradient, eval_mode
from sweep.worker.activations import Frozen, chunks


def soft_label_loss(z: torch.Tensor, teacher: torch.Tensor, temperature: float) -> torch.Tensor:
    """`T^2 KL(softmax(teacher / T) || softmax(z / T))`, the batch mean, in float32."""
    log_p = F.log_softmax(teacher.float() / temperature, dim=1)
    log_q = F.log_softmax(z.float() / temperature, dim=1)
    return temperature**2 * (log_p.exp() * (log_p - log_q)).sum(1).mean()


def latent_alignment_loss(student: list[torch.Tensor], target: list[torch.Tensor], weights: list[float]):
    """`sum_k w_k ||s_k - t_k||^2 / ||t_k||^2` over the batch (w normalised to sum to 1), in float32."""
    total = sum(weights)
    loss = torch.zeros((), device=student[0].device)
    for s, t, w in zip(student, target, weights):
        t = t.float()
        loss = loss + (w / total) * ((s.float() - t) ** 2).sum() / (t * t).sum().clamp_min(1e-12)
    return loss


def through(end: torch.nn.Module, h: torch.Tensor, counts: list[int]) -> list[torch.Tensor]:
    """The activations after the first `c` stages of `end` (a Sequential of g's stages after j) for each c in
    `counts` (0: `h` itself), one pass up to the largest."""
    out, at = {0: h}, h
    for c, stage in enumerate(end[: max(counts)], start=1):
        at = stage(at)
        out[c] = at
    return [out[c] for c in counts]


def _refuse_noise(ctx: FitContext) -> None:
    if getattr(ctx.spec, "noise_sigma", None) is not None:
        raise ValueError(f"{ctx.spec.objective} matches the end network on images: a noise sender has none")


def _fit_on_targets(ctx: FitContext, loss, end_cached: bool = True) -> dict:
    """The gradient loop with `loss(T(a), idx, x)` (idx: the batch's training-image indices; x: its images,
    None when the loop runs on the front's cached activations)."""
    _refuse_noise(ctx)
    index = torch.arange(len(ctx.splits.train_y))
    fits = ctx.front_is_frozen and all(ctx.front_acts.fits(p, ctx.spec.precision) for p in ("train", "val"))
    if fits and end_cached:
        return _fit_by_gradient(ctx, lambda a, i, gen: loss(ctx.stitcher(a), i, None), True, train_y=index)
    return _fit_by_gradient(ctx, lambda x, i, gen: loss(ctx.stitcher(_features(ctx, x)), i, x), train_y=index)


def _end_train(ctx: FitContext):
    """g<=j of every training image, chunk by chunk (the worker's cache when it keeps them)."""
    n = len(ctx.splits.train_y)
    return chunks(ctx.end_acts, ctx.end_front, ctx.splits.train_x, "train", n, ctx.device)


def fit_soft_labels(ctx: FitContext) -> dict:
    temperature = ctx.params["temperature"]
    with eval_mode(ctx.end_front, ctx.end), torch.no_grad():
        teacher = torch.cat([ctx.end(b.to(ctx.device)).float() for b in _end_train(ctx)])
    return _fit_on_targets(ctx, lambda h, i, x: soft_label_loss(ctx.end(h), teacher[i], temperature))


def hint_counts(ctx: FitContext) -> tuple[list[str], list[int]]:
    """The hint layers (`fula_layers` resolved on the end network) and, for each, how many of g's stages after
    j lead to it."""
    model, j = ctx.end_model, ctx.spec.end_point
    if model is None:
        raise ValueError("fula needs the whole end network (FitContext.end_model) for its hint layers")
    points = model.stitch_points + model.extra_points
    layers = hint_layers(ctx.params["fula_layers"], points, model.stitch_points, j)
    names = model.stage_names
    return layers, [names.index(k) - names.index(j) for k in layers]


def hint_targets(ctx: FitContext, layers: list[str]) -> list[torch.Tensor] | None:
    """g<=k of every training image for each hint layer k, as frozen halves of the end donor (the worker's cache
    when it is on: shared by every trial into the same end network); None where the end half is not a cached
    frozen donor half or a hint layer's activations exceed the worker's memory budget."""
    acts = ctx.end_acts
    if acts is None or not acts.cached:
        return None
    halves = []
    for k in layers:
        module = acts.module if k == ctx.spec.end_point else split(ctx.end_model, k)[0]
        half = Frozen(module, (*acts.identity[:-1], k), acts.splits, acts.device, acts.channels_last)
        if not half.fits("train"):
            return None
        halves.append(half)
    return [half.on("train") for half in halves]


def fit_latent_alignment(ctx: FitContext) -> dict:
    layers, counts = hint_counts(ctx)
    weights = list(ctx.params["fula_weights"])
    weights = weights * len(counts) if len(weights) == 1 else weights
    kept = hint_targets(ctx, layers)

    def targets(i: torch.Tensor, x: torch.Tensor | None) -> list[torch.Tensor]:
        if kept is not None:
            return [t[i] for t in kept]
        with eval_mode(ctx.end_front, ctx.end), torch.no_grad():
            return through(ctx.end, ctx.end_front(x), counts)

    def loss(h, i, x):
        return latent_alignment_loss(through(ctx.end, h, counts), targets(i, x), weights)

    return _fit_on_targets(ctx, loss, end_cached=kept is not None)


__all__ = ["fit_latent_alignment", "fit_soft_labels", "hint_targets", "latent_alignment_loss", "soft_label_loss"]
