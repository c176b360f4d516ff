"""One inversion unit (Jones et al. 2022 3.2; Balogh & Jelasity 2023 Section 6): a donor's representation (or a
stitched network's, from its trial's kept stitcher) at one point of a fixed random sample of test images,
inverted by `sweep.measures.inversion.invert` from the recipe's seed images. Pure PyTorch, idempotent. Writes
the images (`inverted/<unit_id>.npz`: the inverted images, their targets and seeds, the targets' test indices)
first, then the unit's part (`inversions/`, one row per image), so a finished part always has its images.
"""

from __future__ import annotations

import io

import numpy as np
import torch

from analysis.store.schema import INVERSIONS_DIR
from sweep.config.inversion import InversionSpec
from sweep.data.core import worker_splits
from sweep.kinds.base import RunContext, record_unit
from sweep.kinds.donor import load_donor
from sweep.kinds.stitched import stitched_network
from sweep.measures.inversion import grey_noise, invert, other_label_seeds
from sweep.models.base import split
from sweep.results import open_root
from sweep.train.evaluate import predict

CPU = torch.device("cpu")


def run_inversion(spec: InversionSpec, ctx: RunContext) -> dict:
    """Invert one donor's sample and write its images and part (skipped when the part exists)."""
    part = ctx.sweep_dir.part(INVERSIONS_DIR, spec.unit_id)
    if part.exists():
        return {"status": "skipped"}
    base = base_row(spec, ctx.sweep_dir.name, str(ctx.device))
    return record_unit(part, INVERSIONS_DIR, base, lambda: _measure(spec, ctx))


def base_row(spec: InversionSpec, sweep_name: str, device: str) -> dict:
    """The columns every row of the unit's part shares: its settings, before what it measures."""
    fields = ("dataset", "donor", "donor_key", "arch", "point", "recipe", "start", "steps", "step_size")
    return dict(
        unit_id=spec.unit_id,
        sweep=sweep_name,
        name=spec.name or None,
        **{k: getattr(spec, k) for k in fields},
        **{k: getattr(spec, k) for k in ("momentum", "eps", "images", "batch_size", "seed", "trial_id")},
        device=device,
    )


def sample(spec: InversionSpec, test_y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The unit's target indices (a fixed random sample of the test images) and seed-image indices (None for
    grey-noise seeds), both drawn from the unit's seed."""
    gen = torch.Generator().manual_seed(spec.seed)
    targets = torch.randperm(len(test_y), generator=gen)[: spec.images]
    seeds = other_label_seeds(test_y[targets], test_y, gen) if spec.start == "other_image" else None
    return targets, seeds


def _measure(spec: InversionSpec, ctx: RunContext) -> list[dict]:
    splits = worker_splits(
        spec.dataset, spec.train_size, spec.val_size, spec.test_size, CPU, root=ctx.data_root, download=ctx.download
    )
    x_all, y_all = splits.test_x, splits.test_y
    targets, seed_idx = sample(spec, y_all)
    x_t, y_t = x_all[targets], y_all[targets]
    if seed_idx is None:
        noise = torch.Generator().manual_seed(spec.seed + 1)
        x_s = torch.stack([grey_noise(tuple(x_t.shape[1:]), noise) for _ in range(len(x_t))])
    else:
        x_s = x_all[seed_idx]
    model, g, refitted = _network(spec, ctx)
    for p in model.parameters():
        p.requires_grad_(False)
    out = {k: [] for k in ("images", "loss", "loss_start", "best_step")}
    for i in range(0, len(x_t), spec.batch_size):
        t, s = x_t[i : i + spec.batch_size].to(ctx.device), x_s[i : i + spec.batch_size].to(ctx.device)
        with torch.no_grad():
            target_rep = g(t)
        kw = dict(steps=spec.steps, step_size=spec.step_size, momentum=spec.momentum, eps=spec.eps)
        got = invert(g, s, target_rep, **kw)
        for k in out:
            out[k].append(getattr(got, k).cpu())
        ctx.report({"phase": "inverted", "images": min(i + spec.batch_size, len(x_t)), "of": len(x_t)})
    inv = torch.cat(out["images"])
    pred, pred_t = (predict(model, images, ctx.device).cpu() for images in (inv, x_t))
    _write_images(ctx, spec, inv, x_t, x_s, targets)
    loss, loss0, best = (torch.cat(out[k]) for k in ("loss", "loss_start", "best_step"))
    d_seed = (inv - x_s).flatten(1).norm(dim=1)
    d_target = (inv - x_t).flatten(1).norm(dim=1)
    return [
        dict(
            position=j,
            image=int(targets[j]),
            label=int(y_t[j]),
            seed_image=None if seed_idx is None else int(seed_idx[j]),
            seed_label=None if seed_idx is None else int(y_all[seed_idx[j]]),
            loss=float(loss[j]),
            loss_start=float(loss0[j]),
            best_step=int(best[j]),
            dist_seed=float(d_seed[j]),
            dist_target=float(d_target[j]),
            pred=int(pred[j]),
            pred_target=int(pred_t[j]),
            stitcher_refitted=refitted,
        )
        for j in range(len(inv))
    ]


def _network(spec: InversionSpec, ctx: RunContext):
    """(the whole network, the part up to the inverted point, whether a stitcher was fitted again): a donor, or
    a trial's stitched network (its kept stitcher between the donors' halves)."""
    if spec.trial is None:
        model = load_donor(ctx.sweep_dir, spec.donor_key, ctx.device).eval()
        return model, split(model, spec.point)[0], None
    st = stitched_network(ctx.sweep_dir, spec.trial, ctx.device, ctx.data_root, ctx.download)
    if st.refitted:
        ctx.report({"phase": "refitted", "trial": spec.trial_id, "note": "the trial kept no stitcher: fitted again"})
    return st.upto(spec.trial.end_point), st.upto(spec.trial.end_point, spec.point), st.refitted


def _write_images(ctx: RunContext, spec: InversionSpec, inv, targets_x, seeds_x, targets) -> None:
    buf = io.BytesIO()
    arrays = dict(inverted=inv, targets=targets_x, seeds=seeds_x)
    np.savez_compressed(buf, **{k: v.float().numpy() for k, v in arrays.items()}, image=targets.numpy())
    open_root(ctx.sweep_dir.inverted(spec.unit_id)).write_bytes(buf.getvalue())


def read_inverted(sweep_dir, unit_id: str) -> dict[str, np.ndarray]:
    """An inversion unit's arrays (`inverted`, `targets`, `seeds`, `image`); raises when it has none."""
    loc = open_root(sweep_dir.inverted(unit_id))
    if not loc.exists():
        raise FileNotFoundError(f"inversion unit {unit_id} has no images at {loc}: run the sweep's inversions first")
    with np.load(io.BytesIO(loc.read_bytes())) as npz:
        return {k: npz[k] for k in npz.files}
