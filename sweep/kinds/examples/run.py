"""One examples unit (`sweep.kinds.examples.spec`): the pictures of one dataset, noise sender or attacked donor,
written as one Parquet part (`examples/`), one row per picture: where it goes in the report's grid (panel, row,
column) and its pixels as 8-bit values in [0, 1] (channels x height x width, row-major). Idempotent."""

from __future__ import annotations

import torch

from sweep.config.shapes import activation_shape
from sweep.kinds.base import RunContext, record_once, unit_columns
from sweep.kinds.examples.spec import ExamplesSpec
from sweep.kinds.examples.table import TABLE
from sweep.registry import DATASETS
from sweep.worker.splits import worker_splits

CPU = torch.device("cpu")
GRID = 8  # noise: feature maps per grid row


def run_examples(spec: ExamplesSpec, ctx: RunContext) -> dict:
    """Draw one unit's pictures and write its part (skipped when the part exists)."""
    base = base_row(spec, ctx.sweep_dir.name, str(ctx.device))
    draw = {"images": _images, "palette": _palette, "noise": _noise, "attacks": _attacks}[spec.show]
    return record_once(ctx, TABLE, spec, base, lambda: draw(spec, ctx))


def base_row(spec: ExamplesSpec, sweep_name: str, device: str) -> dict:
    """The columns every row of the unit's part shares: its settings, before what it measures."""
    return unit_columns(
        spec,
        sweep_name,
        show=spec.show,
        dataset=spec.dataset,
        donor=spec.donor or None,
        donor_key=spec.donor_key,
        arch=spec.arch,
        point=spec.point,
        sender=spec.sender or None,
        position=spec.position,
        seed=spec.seed,
        device=device,
    )


def picture(image: torch.Tensor) -> dict:
    """An image in [0, 1] (C x H x W, or H x W) as the columns that hold it: 8-bit pixels, rounded."""
    image = image.detach().float().cpu()
    image = image.unsqueeze(0) if image.dim() == 2 else image
    pixels = (image.clamp(0, 1) * 255).round().to(torch.uint8).contiguous()
    c, h, w = pixels.shape
    return dict(channels=c, height=h, width=w, pixels=pixels.numpy().tobytes())


def _test_split(spec: ExamplesSpec, ctx: RunContext):
    sizes = (spec.train_size, spec.val_size, spec.test_size)
    return worker_splits(spec.dataset, *sizes, CPU, root=ctx.data_root, download=ctx.download)


def _images(spec: ExamplesSpec, ctx: RunContext) -> list[dict]:
    """`per_class` test images of each class, drawn at random from the class's test images."""
    splits = _test_split(spec, ctx)
    gen = torch.Generator().manual_seed(spec.seed)
    rows = []
    for c in spec.classes:
        members = torch.nonzero(splits.test_y == c).flatten()
        chosen = members[torch.randperm(len(members), generator=gen)[: spec.per_class]].sort().values
        rows += [
            dict(
                panel=spec.name or "examples",
                row=spec.dataset,
                column=len(rows) + k,
                label=c,
                image=int(i),
                **picture(splits.test_x[i]),
            )  # fmt: skip
            for k, i in enumerate(chosen.tolist())
        ]
    return rows


def _palette(spec: ExamplesSpec, ctx: RunContext) -> list[dict]:
    """The colours the dataset paints its images with, one flat 8 x 8 swatch per colour (its index)."""
    return [
        dict(
            panel=spec.name or "palette",
            row=spec.dataset,
            column=k,
            label=k,
            **picture(torch.tensor(rgb, dtype=torch.float32).div(255).view(3, 1, 1).expand(3, 8, 8)),
        )  # fmt: skip
        for k, rgb in enumerate(DATASETS[spec.dataset].palette)
    ]


def _noise(spec: ExamplesSpec, ctx: RunContext) -> list[dict]:
    """The first sample of each class that a stitching trial into the receiver at the point draws (Smith & Marcu
    2024 Algorithm 2), its first `maps` feature maps laid out `GRID` to a row."""
    from sweep.stitching.noise import noise_seed, noise_splits

    shape = activation_shape(spec.arch, spec.dataset, spec.point)
    num_classes = DATASETS[spec.dataset].num_classes
    seed = noise_seed(spec.seed, spec.donor_key, spec.point)
    samples = noise_splits(shape, num_classes, spec.noise_sigma, 1, 1, 0, seed).train_x[:num_classes]
    panel = f"{spec.name + ': ' if spec.name else ''}{spec.sender} into {spec.donor} @{spec.point}"
    rows = []
    for c in spec.classes:
        sample = samples[c]
        maps = sample if sample.dim() == 3 else sample.reshape(1, 1, -1) if sample.dim() == 1 else sample[None]
        for m in range(spec.maps):
            row = f"class {c}, maps {m - m % GRID}-{min(m - m % GRID + GRID, spec.maps) - 1}"
            rows.append(dict(panel=panel, row=row, column=m % GRID, label=c, **picture(maps[m])))
    return rows


def _attacks(spec: ExamplesSpec, ctx: RunContext) -> list[dict]:
    """The first test images, then each attack's adversarial images and perturbation (x' - x, magnified so
    that its largest absolute value spans [0, 1] about grey 0.5; `scale` records by how much)."""
    from sweep.train.threats import craft
    from sweep.worker.zoo import load_donor

    splits = _test_split(spec, ctx)
    x, y = splits.test_x[: spec.images], splits.test_y[: spec.images]
    model = load_donor(ctx.sweep_dir, spec.donor_key, ctx.device).eval()
    panel = f"{spec.name + ': ' if spec.name else ''}attacks on {spec.donor}"
    with torch.no_grad():
        clean = model(x.to(ctx.device)).argmax(1).cpu()
    rows = [
        dict(panel=panel, row="benign", column=k, label=int(y[k]), pred=int(clean[k]), image=k, **picture(x[k]))
        for k in range(len(y))
    ]
    for threat, eps, steps, step_size in spec.attacks:
        adv = craft(threat, model, x, y, eps, step_size, steps, spec.seed, ctx.device)
        with torch.no_grad():
            pred = model(adv.to(ctx.device)).argmax(1).cpu()
        for k in range(len(y)):
            delta = adv[k] - x[k]
            scale = 0.5 / max(float(delta.abs().max()), 1e-12)
            attack = dict(threat=threat, eps=eps, label=int(y[k]), pred=int(pred[k]), image=k, column=k)
            rows += [
                dict(panel=panel, row=f"{threat} eps {eps:g}", **attack, **picture(adv[k])),
                dict(
                    panel=panel,
                    row=f"{threat} eps {eps:g}: perturbation",
                    scale=scale,
                    **attack,
                    **picture(0.5 + scale * delta),
                ),
            ]
        ctx.report({"phase": "attack", "threat": threat})
    return rows
