"""One inversion unit (Jones et al. 2022 3.2; Balogh & Jelasity 2023 Section 6): a donor's representation (or a
stitched network's, from its trial's kept stitcher) at one point of a fixed random sample of test images,
inverted by `sweep.measures.inversion.invert` from the recipe's seed images. Pure PyTorch, idempotent. Writes
the images first (`sweep.store.inverted`: shards of 1,000 images in the space's `dtype`, each a resume
point, then an index of the targets' and seeds' test indices), then the unit's part (`inversions/`, one row
per image), so a finished part always has its images. Its rows are measured on the images as stored.
"""

from __future__ import annotations

import numpy as np
import torch

from sweep.data.stream import chunks
from sweep.kinds.base import RunContext, record_once, unit_columns
from sweep.kinds.inversion.spec import InversionSpec
from sweep.kinds.inversion.table import TABLE
from sweep.kinds.trial.stitched import stitched_network
from sweep.measures.inversion import grey_noise, invert, other_label_seeds
from sweep.models.base import split
from sweep.store import inverted as stored
from sweep.train.evaluate import predict
from sweep.worker.splits import worker_splits
from sweep.worker.zoo import load_donor

CPU = torch.device("cpu")


def run_inversion(spec: InversionSpec, ctx: RunContext) -> dict:
    """Invert one donor's sample and write its images and part (skipped when the part exists)."""
    base = base_row(spec, ctx.sweep_dir.name, str(ctx.device))
    return record_once(ctx, TABLE, spec, base, lambda: _measure(spec, ctx))


def base_row(spec: InversionSpec, sweep_name: str, device: str) -> dict:
    """The columns every row of the unit's part shares: its settings, before what it measures."""
    fields = ("dataset", "donor", "donor_key", "arch", "point", "recipe", "start", "steps", "step_size")
    return unit_columns(
        spec,
        sweep_name,
        **{k: getattr(spec, k) for k in fields},
        **{k: getattr(spec, k) for k in ("momentum", "eps", "images", "batch_size", "seed", "trial_id", "dtype")},
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
    root, uid = ctx.sweep_dir.path, spec.unit_id
    for k, start in enumerate(range(0, len(x_t), stored.SHARD)):  # each shard a resume point
        if stored.has_shard(root, uid, k):
            ctx.report({"phase": "resumed", "shard": k + 1, "of": -(-len(x_t) // stored.SHARD)})
            continue
        got = _invert(spec, g, x_t[start : start + stored.SHARD], x_s[start : start + stored.SHARD], ctx, start)
        stored.write_shard(root, uid, k, got.pop("inverted"), spec.dtype, **got)
        del got  # before the next shard is inverted: one shard in memory
    rows = []
    for k, start in enumerate(range(0, len(x_t), stored.SHARD)):  # what was stored: one shard in memory
        shard = stored.read_shard(root, uid, k, as_stored=True)
        inv = shard["inverted"]  # as stored (uint8: a quarter of float32), decoded a batch at a time
        t, s = (x[start : start + len(inv)] for x in (x_t, x_s))
        pred, pred_t, d_seed, d_target = _compare(model, inv, t, s, spec, ctx)
        rows += [
            dict(
                position=start + j,
                image=int(targets[start + j]),
                label=int(y_t[start + j]),
                seed_image=None if seed_idx is None else int(seed_idx[start + j]),
                seed_label=None if seed_idx is None else int(y_all[seed_idx[start + j]]),
                loss=float(shard["loss"][j]),
                loss_start=float(shard["loss_start"][j]),
                best_step=int(shard["best_step"][j]),
                dist_seed=float(d_seed[j]),
                dist_target=float(d_target[j]),
                pred=int(pred[j]),
                pred_target=int(pred_t[j]),
                stitcher_refitted=refitted,
            )
            for j in range(len(inv))
        ]
        if k == 0:
            first = stored.decode(inv[: stored.PREVIEW])
        del shard, inv  # before the next shard is read
    preview = (x_t[: stored.PREVIEW].numpy(), x_s[: stored.PREVIEW].numpy(), first)
    stored.write_index(root, uid, targets.numpy(), None if seed_idx is None else seed_idx.numpy(), spec.dtype, *preview)
    return rows


def _compare(model, inv: np.ndarray, t, s, spec: InversionSpec, ctx: RunContext) -> tuple:
    """Per image of a shard (`inv`: its images as stored): the network's class of the inverted image and of its
    target, and the inverted image's distances to its seed and its target, a batch at a time."""
    out = []
    for i, tb, sb in zip(range(0, len(inv), spec.batch_size), chunks(t, spec.batch_size), chunks(s, spec.batch_size)):
        ib = torch.from_numpy(stored.decode(inv[i : i + spec.batch_size]))
        pred, pred_t = (predict(model, images, ctx.device).cpu() for images in (ib, tb))
        out.append((pred, pred_t, (ib - sb).flatten(1).norm(dim=1), (ib - tb).flatten(1).norm(dim=1)))
    return tuple(torch.cat(column) for column in zip(*out))


def _invert(spec: InversionSpec, g, x_t: torch.Tensor, x_s: torch.Tensor, ctx: RunContext, offset: int) -> dict:
    """One shard's inversion, in batches: `inverted` (N x C x H x W, on the host, in the stored dtype) and its
    per-image losses."""
    out = {k: [] for k in ("images", "loss", "loss_start", "best_step")}
    parts = zip(range(0, len(x_t), spec.batch_size), chunks(x_t, spec.batch_size), chunks(x_s, spec.batch_size))
    for i, t, s in parts:
        t, s = t.to(ctx.device), s.to(ctx.device)
        with torch.no_grad():
            target_rep = g(t)
        kw = dict(steps=spec.steps, step_size=spec.step_size, momentum=spec.momentum, eps=spec.eps)
        got = invert(g, s, target_rep, **kw)
        for k in out:
            out[k].append(getattr(got, k).cpu().numpy())
        out["images"][-1] = stored.encode(out["images"][-1], spec.dtype)  # a shard is held as it is stored
        done = offset + min(i + spec.batch_size, len(x_t))
        ctx.report({"phase": "inverted", "images": done, "of": spec.images})
    images, loss, loss0, best = (np.concatenate(out[k]) for k in ("images", "loss", "loss_start", "best_step"))
    return dict(inverted=images, loss=loss, loss_start=loss0, best_step=best)


def _network(spec: InversionSpec, ctx: RunContext):
    """(the whole network, the part up to the inverted point, whether a stitcher was fitted again): a donor, or
    a trial's stitched network (its kept stitcher between the donors' halves)."""
    if spec.trial is None:
        model = load_donor(ctx.sweep_dir, spec.donor_key, ctx.device).eval()
        return model, split(model, spec.point)[0], None
    st = stitched_network(spec.trial, ctx)
    if st.refitted:
        ctx.report({"phase": "refitted", "trial": spec.trial_id, "note": "the trial kept no stitcher: fitted again"})
    return st.upto(spec.trial.end_point), st.upto(spec.trial.end_point, spec.point), st.refitted


def inverted_index(sweep_dir, unit_id: str) -> np.ndarray:
    """An inversion unit's target indices among the test images, in its order (its images are not read)."""
    try:
        return stored.index(sweep_dir.path, unit_id)["image"]
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"{exc}: run the sweep's inversions first") from None


def read_inverted(sweep_dir, unit_id: str) -> dict[str, np.ndarray]:
    """An inversion unit's target indices (`image`) and its inverted images (`inverted`, float32, all in memory:
    what a similarity unit on inverted data measures); raises when it has none."""
    image = inverted_index(sweep_dir, unit_id)
    return {"image": image, "inverted": stored.inverted(sweep_dir.path, unit_id)}
