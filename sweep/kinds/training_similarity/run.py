"""One unit of CKA across training epochs (Cianfarani et al. 2022 Section 5, Figs 6 and 25): for one donor
trained with `checkpoint_every`, every point's CKA between the representations of every pair of kept
epochs, on the first `images` test images, benign or adversarial (crafted once against the final epoch).

Minibatch estimator as the similarity units' (`MinibatchCKA`, `passes` reshuffled passes): per batch, one
forward pass of every kept epoch's weights reading every point at once, each point's activation reduced to its
Gram as its node runs (`gram_reader`). The kept epochs' weights stay on the host; one model is on the device
and takes each epoch's weights in turn (per batch: holding the Grams of a whole pass instead would grow with
the number of images). Memory: one model, one node's activations of a batch, and E x P Grams of batch x batch
(E epochs, P points; 8 bytes each): lower `batch_size` for many epochs.
"""

from __future__ import annotations

import torch

from sweep.kinds.base import RunContext, record_once, unit_columns
from sweep.kinds.similarity.run import gram_reader
from sweep.kinds.training_similarity.spec import TrainingSimilaritySpec
from sweep.kinds.training_similarity.table import TABLE
from sweep.measures.similarity import MinibatchCKA, minibatch_images
from sweep.store.results import load_torch
from sweep.train.donors import epoch_checkpoint
from sweep.train.threats import craft
from sweep.worker.splits import worker_splits
from sweep.worker.zoo import load_donor

CPU = torch.device("cpu")  # the unit moves the images it uses; the worker keeps them on the host


def run_training_similarity(spec: TrainingSimilaritySpec, ctx: RunContext) -> dict:
    """Measure one unit and write its part (skipped when the part exists). Returns its status."""
    base = base_row(spec, ctx.sweep_dir.name, str(ctx.device))
    return record_once(ctx, TABLE, spec, base, lambda: _measure(spec, ctx))


def base_row(spec: TrainingSimilaritySpec, sweep_name: str, device: str) -> dict:
    """The columns every row of the unit's part shares: its settings, before what it measures."""
    settings = ("dataset", "donor", "donor_key", "arch", "inputs", "images", "batch_size", "passes", "seed")
    attack = ("attack_norm", "attack_eps", "attack_steps", "attack_step_size")
    return unit_columns(
        spec,
        sweep_name,
        final_epoch=spec.epochs[-1],
        **{k: getattr(spec, k) for k in settings + attack},
        device=device,
    )


def epoch_weights(spec: TrainingSimilaritySpec, ctx: RunContext) -> list[dict]:
    """The donor's weights at each kept epoch (state dicts on the host), in the order of `spec.epochs`."""
    states = []
    for epoch in spec.epochs:
        path = epoch_checkpoint(ctx.sweep_dir.zoo(spec.donor_key), epoch)
        if not path.exists():
            raise FileNotFoundError(f"the weights of epoch {epoch} are missing ({path}): was the donor trained here?")
        states.append(load_torch(path, map_location=CPU)["state_dict"])
    return states


def _measure(spec: TrainingSimilaritySpec, ctx: RunContext) -> list[dict]:
    splits = worker_splits(
        spec.dataset, spec.train_size, spec.val_size, spec.test_size, CPU, root=ctx.data_root, download=ctx.download
    )
    x, y = splits.test_x[: spec.images], splits.test_y[: spec.images]
    states = epoch_weights(spec, ctx)
    model = load_donor(ctx.sweep_dir, spec.donor_key, ctx.device)  # the final epoch: the finished donor
    if spec.inputs == "adversarial":  # crafted against the final epoch
        args = (spec.attack_eps, spec.attack_step_size, spec.attack_steps, spec.seed, ctx.device)
        x = craft(spec.attack_norm, model, x, y, *args)
    read = gram_reader(model, spec.points)  # reads whatever weights the model holds when called
    accumulators = [MinibatchCKA() for _ in spec.points]
    for p, (batch,) in minibatch_images((x,), spec.batch_size, spec.passes, spec.seed):
        per_point: list[list[torch.Tensor]] = [[] for _ in spec.points]  # [point][epoch]: Grams only
        batch = batch.to(ctx.device)
        for state in states:
            model.load_state_dict(state)
            with torch.no_grad():
                for k, g in enumerate(read(batch)):
                    per_point[k].append(g)
        for acc, epoch_grams in zip(accumulators, per_point):
            stacked = torch.stack(epoch_grams)
            acc.update_grams(stacked, stacked)
        ctx.report({"phase": "training_similarity", "pass": p + 1, "passes": spec.passes})
    rows = []
    for k, (point, acc) in enumerate(zip(spec.points, accumulators)):
        matrix = acc.value().cpu()
        for i, ea in enumerate(spec.epochs):
            for j, eb in enumerate(spec.epochs):
                rows.append(dict(point=point, point_index=k + 1, epoch_a=ea, epoch_b=eb, cka=float(matrix[i, j])))
    return rows
