"""Results made by hand from a space's plan, for tests that draw the report without running a sweep.

Every unit the space plans gets the rows its kind writes: the configuration columns from the kind's own row
function (`config_row`, `base_row`), one row per point, pair of points, pair of epochs, member, image or picture as
the kind writes them, and the measured values (every other column of the table's schema) drawn from a seeded
generator. The tables are written as Parquet into a results folder, so the report reads them as it reads a sweep's.
The numbers mean nothing; the keys are the space's own, so a section, a registry filter or a layout that no longer
matches what a space produces finds no rows, or the wrong ones.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa

from sweep.store.results import write_rows
from sweep.store.schema import schema, trial_schema

DEVICE = "cpu"
IMAGES = 4  # images per unit where a kind writes a row per image (t-SNE, inversions, examples)
EPOCHS = 3  # epochs of each donor's training curves
KEPT = 4  # kept epochs per training-similarity unit: the first, the last and evenly between (a paper keeps 200)
POINTS = 6  # points per side of a similarity unit, likewise (a WideResNet-28-10 has dozens)


def _spread(values: tuple, n: int) -> list[tuple[int, object]]:
    """(index, value) of at most `n` of `values`: the first, the last and evenly between."""
    picks = np.unique(np.linspace(0, len(values) - 1, min(n, len(values))).round().astype(int))
    return [(int(i), values[i]) for i in picks]


def _fill(row: dict, table: pa.Schema, rng: np.random.Generator) -> dict:
    """`row` with every column it does not name given a value: a fraction for a float (so accuracies and similarities
    are in range), a small count for an integer, False for a flag; text stays empty."""
    out = dict(row)
    for field in table:
        if field.name in out:
            continue
        if pa.types.is_floating(field.type):
            out[field.name] = float(rng.uniform(0.05, 0.95))
        elif pa.types.is_integer(field.type):
            out[field.name] = int(rng.integers(1, 5))
        elif pa.types.is_boolean(field.type):
            out[field.name] = False
        elif pa.types.is_timestamp(field.type):
            out[field.name] = datetime(2026, 1, 1, tzinfo=timezone.utc)
    return out | {"status": "done"} if "status" in table.names else out


def _donors(sweep, rng) -> tuple[list[dict], list[dict]]:
    from sweep.kinds.donor.run import base_row
    from sweep.registry import KINDS

    rows, curves = [], []
    for work in KINDS["donor"].units(sweep).values():
        d = work.donor
        base = base_row(d, sweep.name)
        rows += [dict(base, **ev.row_fields(), eval_id=ev.eval_id(d.donor_key)) for ev in work.evaluations]
        for epoch in range(1, EPOCHS + 1):
            for metric in ("train_loss", "val_loss", "val_acc"):
                curves.append(dict(donor=d.name, donor_key=d.donor_key, training=d.training, epoch=epoch,
                                   metric=metric, value=float(rng.uniform(0.1, 2.0))))  # fmt: skip
    return rows, curves


def _trials(sweep) -> tuple[list[dict], list[dict]]:
    from sweep.kinds.trial.run import config_row

    rows, energies = [], []
    for spec in sweep.trials:
        rows.append(config_row(spec, sweep.name))
        if spec.ood_outliers:
            energies += [dict(trial_id=spec.trial_id, sweep=sweep.name, kind=k, energy=float(e))
                         for k in ("target", "stitched", "outlier") for e in range(-IMAGES, 0)]  # fmt: skip
    return rows, energies


def _similarity(units, sweep_name: str) -> list[dict]:
    from sweep.kinds.similarity.run import base_row

    rows = []
    for spec in units:
        base = base_row(spec, sweep_name, DEVICE)
        if spec.measure == "saliency":
            rows.append(base)
            continue
        rows += [dict(base, a_point=pa_, b_point=pb, a_index=i + 1, b_index=j + 1)
                 for i, pa_ in _spread(spec.a_points, POINTS) for j, pb in _spread(spec.b_points, POINTS)]  # fmt: skip
    return rows


def _training_similarity(units, sweep_name: str) -> list[dict]:
    from sweep.kinds.training_similarity.run import base_row

    rows = []
    for spec in units:
        epochs = [e for _, e in _spread(spec.epochs, KEPT)]
        base = base_row(spec, sweep_name, DEVICE)
        rows += [dict(base, point=p, point_index=k + 1, epoch_a=ea, epoch_b=eb)
                 for k, p in _spread(spec.points, POINTS) for ea in epochs for eb in epochs]  # fmt: skip
    return rows


def _inversions(units, sweep_name: str, root: Path) -> list[dict]:
    from sweep.kinds.inversion.run import base_row
    from sweep.store import inverted as stored
    from sweep.store.storage import open_root

    rows, loc = [], open_root(root)
    for spec in units:
        n = min(spec.images, IMAGES)
        rows += [dict(base_row(spec, sweep_name, DEVICE), position=j, image=j, label=j % 2) for j in range(n)]
        images = np.full((n, 1, 8, 8), 0.5, np.float32)
        stored.write_shard(loc, spec.unit_id, 0, images, spec.dtype, loss=np.zeros(n), best_step=np.zeros(n, int))
        stored.write_index(loc, spec.unit_id, np.arange(n), np.arange(n), spec.dtype, images, images, images)
    return rows


def _tsne(units, sweep_name: str) -> list[dict]:
    from sweep.kinds.tsne.run import base_row

    return [
        dict(base_row(spec, sweep_name, DEVICE), point=p, point_index=k + 1, image=j, label=j % 3)
        for spec in units
        for k, p in enumerate(spec.points)
        for j in range(IMAGES)
    ]


def _examples(units, sweep_name: str) -> list[dict]:
    from sweep.kinds.examples.run import base_row

    pixels = np.full((1, 8, 8), 128, np.uint8).tobytes()
    return [
        dict(base_row(spec, sweep_name, DEVICE), panel=spec.name or "examples", row=f"row {r}", column=c,
             label=c, channels=1, height=8, width=8, pixels=pixels)
        for spec in units for r in range(2) for c in range(IMAGES)
    ]  # fmt: skip


def _reptests(units, sweep_name: str) -> list[dict]:
    from sweep.kinds.reptest.run import base_row

    rows = []
    for spec in units:
        ref, _, layer, rank = spec.members[0]
        rows += [dict(base_row(spec, sweep_name), donor=d, donor_key=key, layer=lay, rank=r, reference=m == 0,
                      ref_donor=ref, ref_layer=layer, ref_rank=rank)
                 for m, (d, key, lay, r) in enumerate(spec.members)]  # fmt: skip
    return rows


def synthetic_results(space: Path, root: Path, seed: int = 0) -> Path:
    """Write `root` (a results folder named as the space) with made-up rows for every unit `space` plans."""
    from sweep.config.space import load_space

    sweep = load_space(space)
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    donors, donor_curves = _donors(sweep, rng)
    trials, energies = _trials(sweep)
    units = sweep.units
    tables = {
        "donors": donors,
        "donor_curves": donor_curves,
        "trials": trials,
        "energies": energies,
        "similarity": _similarity(units.get("similarity", ()), sweep.name),
        "training_similarity": _training_similarity(units.get("training_similarity", ()), sweep.name),
        "inversions": _inversions(units.get("inversion", ()), sweep.name, root),
        "tsne": _tsne(units.get("tsne", ()), sweep.name),
        "examples": _examples(units.get("examples", ()), sweep.name),
        "reptests": _reptests(sweep.reptests, sweep.name),
    }
    for name, rows in tables.items():
        if rows:
            table = trial_schema() if name == "trials" else schema(name)
            write_rows(root / name / "synthetic.parquet", [_fill(r, table, rng) for r in rows], table)
    return root
