"""Objectives that train the stitcher towards the end network rather than the labels, in the shared gradient
loop (`_fit_by_gradient`: the block's optimiser, schedule, init, epochs and curves):

- `slm`: soft-label matching, Hinton et al. 2015's distillation loss on the stitch,
  `T^2 KL(softmax(z_end / T) || softmax(z_stitched / T))`, batch mean; z_end are the end network's logits on the
  same images (computed once, in eval mode, from its cached g<=j activations).
- `fula`: our reading of functional latent alignment (Athanasiadis, Karmush & Felsberg 2025): over hint layers
  k of the end network at and after the stitch point j, `sum_k w_k ||s_k - t_k||^2 / ||t_k||^2` on each batch,
  s_k the stitched network's activations at k (T(f<=i(x)) through g's layers j+1..k), t_k the end network's
  own, the weights normalised to sum to 1 (docs/design.md, departures).

Both train on the front's cached activations where the engine keeps them (as `tlm`); the end network's targets
come from its cached g<=j activations: `slm`'s logits once for every training image, `fula`'s hint layers per
batch (a no-grad pass of g's layers up to the last hint), since every hint layer of every image can be many
times one layer's size.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from sweep.stitching.declared import hint_layers
from sweep.stitching.objectives import FitContext, _features, _fit_by_gradient, eval_mode
from sweep.worker.activations import chunks


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


def fit_latent_alignment(ctx: FitContext) -> dict:
    _, counts = hint_counts(ctx)
    weights = list(ctx.params["fula_weights"])
    weights = weights * len(counts) if len(weights) == 1 else weights
    cached = ctx.end_acts is not None and ctx.end_acts.cached and ctx.end_acts.fits("train", "fp32")
    end_train = ctx.end_acts.on("train") if cached else None

    def targets(i: torch.Tensor, x: torch.Tensor | None) -> list[torch.Tensor]:
        with eval_mode(ctx.end_front, ctx.end), torch.no_grad():
            b = end_train[i] if end_train is not None else ctx.end_front(x)
            return through(ctx.end, b, counts)

    def loss(h, i, x):
        return latent_alignment_loss(through(ctx.end, h, counts), targets(i, x), weights)

    return _fit_on_targets(ctx, loss, end_cached=cached)


__all__ = ["fit_latent_alignment", "fit_soft_labels", "latent_alignment_loss", "soft_label_loss"]
