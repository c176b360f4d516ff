"""One t-SNE unit (Balogh & Jelasity 2023 Fig. 7): a donor's activations at each of its points on a fixed random
sample of test images, flattened and embedded in 2-D by scikit-learn's TSNE (PCA initialisation, the unit's seed
as its random state). Idempotent, one Parquet part per unit (`tsne/`), one row per (point, image)."""

from __future__ import annotations

import torch

from sweep.kinds.base import RunContext, record_once, unit_columns
from sweep.kinds.tsne.spec import EmbeddingSpec
from sweep.kinds.tsne.table import TABLE
from sweep.models.features import features, flat_features
from sweep.worker.splits import worker_splits
from sweep.worker.zoo import load_donor

CPU = torch.device("cpu")


def run_embedding(spec: EmbeddingSpec, ctx: RunContext) -> dict:
    """Embed one donor's points and write its part (skipped when the part exists)."""
    base = base_row(spec, ctx.sweep_dir.name, str(ctx.device))
    return record_once(ctx, TABLE, spec, base, lambda: _measure(spec, ctx))


def base_row(spec: EmbeddingSpec, sweep_name: str, device: str) -> dict:
    """The columns every row of the unit's part shares: its settings, before what it measures."""
    return unit_columns(
        spec,
        sweep_name,
        **{k: getattr(spec, k) for k in ("dataset", "donor", "donor_key", "arch", "images", "perplexity", "seed")},
        device=device,
    )


def tsne_2d(a: torch.Tensor, perplexity: float, seed: int) -> tuple:
    """(N x 2 coordinates, the final KL divergence) of the rows of `a` (N x features)."""
    from sklearn.manifold import TSNE

    tsne = TSNE(n_components=2, perplexity=min(perplexity, (len(a) - 1) / 3), init="pca", random_state=seed)
    return tsne.fit_transform(a.double().numpy()), float(tsne.kl_divergence_)


def _measure(spec: EmbeddingSpec, ctx: RunContext) -> list[dict]:
    splits = worker_splits(
        spec.dataset, spec.train_size, spec.val_size, spec.test_size, CPU, root=ctx.data_root, download=ctx.download
    )
    index = torch.randperm(len(splits.test_y), generator=torch.Generator().manual_seed(spec.seed))[: spec.images]
    x, y = splits.test_x[index], splits.test_y[index]
    model = load_donor(ctx.sweep_dir, spec.donor_key, ctx.device).eval()
    acts = flat_features(features(model, spec.points), x, ctx.device)
    rows = []
    for k, (point, a) in enumerate(zip(spec.points, acts)):
        xy, kl = tsne_2d(a, spec.perplexity, spec.seed)
        ctx.report({"phase": "tsne", "point": point, "points": len(spec.points)})
        rows += [
            dict(
                point=point,
                point_index=k + 1,
                image=int(index[j]),
                label=int(y[j]),
                x=float(xy[j, 0]),
                y=float(xy[j, 1]),
                kl_divergence=kl,
            )
            for j in range(len(y))
        ]
    return rows
