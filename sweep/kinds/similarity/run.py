"""One similarity unit (Cianfarani et al. 2022, Section 2.3): linear CKA between every point of donor A and
every point of donor B, each on benign test images or on adversarial ones, with no stitcher. Pure PyTorch,
idempotent, one Parquet part per unit (`similarity/`), one row per (A point, B point).

The minibatch estimator (`MinibatchCKA`: unbiased HSIC summed over batches, Nguyen et al. 2021) runs
`passes` passes over the images, each in a new order drawn from the unit's seed, one forward pass per donor
per batch with every point read at once, each point's activation reduced to its Gram the moment it is computed
(`reduced_features`): memory holds one node's activations of one batch and the batch's Grams, whatever the
number of images and of points. A final batch of 3 images or fewer is left out of a pass (HSIC_1 needs 4).
The full estimator reads the images once in batches of 250: where every point has no more features than
there are images (Jones et al.'s penultimate layers) it accumulates the feature-space products
(`StreamedCKA`), otherwise it holds every point's activations of all the images. Adversarial examples are crafted
once per unit, against the attack's source donor, by PGD in batches of 250 (L-inf or L2; step 2.5 eps /
steps by default), and both sides then read the same images in the same order.
"""

from __future__ import annotations

import time

import torch

from sweep.data.stream import chunks
from sweep.kinds.base import RunContext, record_once, unit_columns
from sweep.kinds.inversion.run import inverted_index, read_inverted
from sweep.kinds.similarity.spec import SimilaritySpec
from sweep.kinds.similarity.table import TABLE
from sweep.measures.full_cka import CKA_BATCH, cka_streams
from sweep.measures.indices.cka import linear_cka
from sweep.measures.indices.saliency import saliency_cosines
from sweep.measures.similarity import MinibatchCKA, StreamedCKA, gram, minibatch_images
from sweep.models.features import features, reduced_features
from sweep.registry import INDICES
from sweep.train.evaluate import accuracy, predict
from sweep.train.threats import craft
from sweep.worker.splits import worker_test_images
from sweep.worker.zoo import load_donor


def run_similarity(spec: SimilaritySpec, ctx: RunContext) -> dict:
    """Measure one unit and write its part (skipped when the part exists). Returns its status."""
    base = base_row(spec, ctx.sweep_dir.name, str(ctx.device))
    return record_once(ctx, TABLE, spec, base, lambda: _measure(spec, ctx))


def base_row(spec: SimilaritySpec, sweep_name: str, device: str) -> dict:
    """The columns every row of the unit's part shares: its settings, before what it measures."""
    return unit_columns(
        spec,
        sweep_name,
        **{k: getattr(spec, k) for k in ("dataset", "a", "b", "a_key", "b_key", "a_arch", "b_arch")},
        **{k: getattr(spec, k) for k in ("a_inputs", "b_inputs", "estimator", "images", "batch_size", "passes")},
        **{k: getattr(spec, k) for k in ("attack_source", "attack_norm", "attack_eps", "attack_steps")},
        attack_step_size=spec.attack_step_size,
        measure=spec.measure,
        svcca_max_k=spec.svcca_max_k,
        mknn_k=spec.mknn_k,
        inversion_id=spec.inversion_id,
        inverted=spec.inverted,
        seed=spec.seed,
        device=device,
    )


def _measure(spec: SimilaritySpec, ctx: RunContext) -> list[dict]:
    x, y = unit_images(spec, ctx)
    inputs = {"benign": x}
    if spec.inversion_id and "inverted" in (spec.a_inputs, spec.b_inputs):
        inputs["inverted"] = torch.from_numpy(read_inverted(ctx.sweep_dir, spec.inversion_id)["inverted"])
    keys = {spec.a_key, spec.b_key} | ({spec.attack_key} if spec.attack_key else set())
    # the worker's own copies: the unit changes nothing in a donor (no training, no BatchNorm statistics, no
    # parameter gradients: attacks and saliency differentiate the images only)
    models = {key: load_donor(ctx.sweep_dir, key, ctx.device, shared=True) for key in keys}
    if spec.attack_key:
        args = (spec.attack_eps, spec.attack_step_size, spec.attack_steps, spec.seed, ctx.device)
        inputs["adversarial"] = craft(spec.attack_norm, models[spec.attack_key], x, y, *args)
        ctx.report({"phase": "crafted", "images": len(x)})
    xa, xb = inputs[spec.a_inputs], inputs[spec.b_inputs]
    acc = {
        side: accuracy(predict(models[key], xs, ctx.device), y)
        for side, key, xs in (("a", spec.a_key, xa), ("b", spec.b_key, xb))
    }
    index = INDICES[spec.measure]  # the kind dispatches on how the index declares it is computed
    if index.similarity_by == "saliency":
        cos = saliency_cosines(models[spec.a_key], models[spec.b_key], xa, xb, y, ctx.device)
        stats = dict(saliency_cosine=float(cos.mean()), saliency_cosine_std=float(cos.std()))
        return [dict(stats, a_acc=acc["a"], b_acc=acc["b"])]
    same = spec.a_key == spec.b_key and spec.a_points == spec.b_points and spec.a_inputs == spec.b_inputs
    times, extra = None, {}
    if index.similarity_by == "pairwise":  # Cianfarani et al. B.1: OPD and SVCCA on the same held representations
        fa, fb = features(models[spec.a_key], spec.a_points), features(models[spec.b_key], spec.b_points)
        matrix, times, extra = pairwise(measure_fn(spec), *held_features(fa, fb, xa, xb, ctx.device))
    elif spec.estimator == "minibatch":
        ga = gram_reader(models[spec.a_key], spec.a_points)
        gb = None if same else gram_reader(models[spec.b_key], spec.b_points)
        matrix = minibatch_matrix(ga, gb, xa, xb, spec, ctx)
    else:
        fa, fb = features(models[spec.a_key], spec.a_points), features(models[spec.b_key], spec.b_points)
        matrix, times = full_matrix(fa, fb, xa, xb, ctx.device)
    return [
        {
            "a_point": pa,
            "b_point": pb,
            "a_index": i + 1,
            "b_index": j + 1,
            index.entry.similarity_column: float(matrix[i, j]),
            "time_measure_s": None if times is None else float(times[i, j]),
            "a_acc": acc["a"],
            "b_acc": acc["b"],
            **extra.get((i, j), {}),
        }
        for i, pa in enumerate(spec.a_points)
        for j, pb in enumerate(spec.b_points)
    ]


def unit_images(spec: SimilaritySpec, ctx: RunContext) -> tuple[torch.Tensor, torch.Tensor]:
    """The unit's test images and labels on the host: the first `spec.images`, or the inversion's natural
    targets. Only the test images are read (`worker_test_images`), not the split's training part."""
    if not spec.inversion_id:
        return worker_test_images(spec.dataset, spec.images, root=ctx.data_root, download=ctx.download)
    x, y = worker_test_images(spec.dataset, spec.test_size, root=ctx.data_root, download=ctx.download)
    index = torch.from_numpy(inverted_index(ctx.sweep_dir, spec.inversion_id))
    return x[index], y[index]


def measure_fn(spec: SimilaritySpec):
    """The pairwise function of the unit's index (`similarity_by: pairwise`) with the unit's protocol options
    bound (`Index.options`: SVCCA's `svcca_max_k` as `max_k`, mutual k-NN's `mknn_k` as `k` where set): (A's
    matrix, B's) -> value or (value, columns)."""
    index = INDICES[spec.measure]
    if index.similarity_by != "pairwise":
        raise ValueError(f"measure {spec.measure!r}: computed by {index.similarity_by!r}, not by a pairwise function")
    return index.bound({opt: getattr(spec, opt) for opt in index.options})


def pairwise(measure, a: list, b: list) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """`measure` of every pair of A's and B's held matrices, the seconds each took (Cianfarani et al. B.1
    compare the measures' compute time on the same representations) and, where `measure` returns (value,
    columns), each pair's further columns by (i, j)."""
    values, times = torch.zeros(len(a), len(b), dtype=torch.float64), torch.zeros(len(a), len(b), dtype=torch.float64)
    extra = {}
    for i, p in enumerate(a):
        for j, q in enumerate(b):
            t0 = time.perf_counter()
            out = measure(p, q)
            times[i, j] = time.perf_counter() - t0
            values[i, j], extra[i, j] = out if isinstance(out, tuple) else (out, {})
    return values, times, extra


def gram_reader(model: torch.nn.Module, points: tuple[str, ...]):
    """x -> the (P, n, n) stacked Grams (`gram`) of `model`'s activations at `points` on the batch x, each
    computed as its node runs and the activation then dropped."""
    read = reduced_features(model, points, gram)
    return lambda x: torch.stack(read(x))


def minibatch_matrix(ga, gb, xa: torch.Tensor, xb: torch.Tensor, spec, ctx: RunContext) -> torch.Tensor:
    """The P x Q minibatch CKA matrix over `spec.passes` passes in reshuffled order (`spec.batch_size`,
    `spec.seed`); `ga`, `gb` are `gram_reader`s, `gb` None: B is A (the matrix of A with itself)."""
    acc = MinibatchCKA()
    for p, (ba, *bb) in minibatch_images((xa,) if gb is None else (xa, xb), spec.batch_size, spec.passes, spec.seed):
        with torch.no_grad():
            k = ga(ba.to(ctx.device))
            acc.update_grams(k, k if gb is None else gb(bb[0].to(ctx.device)))
        ctx.report({"phase": "similarity", "pass": p + 1, "passes": spec.passes})
    return acc.value().cpu()


def full_matrix(fa, fb, xa: torch.Tensor, xb: torch.Tensor, device: torch.device) -> tuple:
    """Full-batch linear CKA of every pair, in batches of `CKA_BATCH` images: accumulated batch by batch
    (`StreamedCKA`) where `cka_streams` says its products are the smaller, else every activation of the images
    held (n x features each) and `linear_cka` on each pair. The same numbers either way. Returns the matrix and
    each pair's seconds from the held activations (None when accumulated: the cost is spread over the reads)."""
    reads = _reads(fa, fb, xa, xb, device)
    first = next(reads)
    if cka_streams(len(xa), *([t.shape[1] for t in side] for side in first)):
        acc = StreamedCKA()
        acc.update(*first)
        for later in reads:
            acc.update(*later)
        return acc.value().cpu(), None
    return pairwise(linear_cka, *held_features(fa, fb, xa, xb, device, (first, reads)))[:2]


def held_features(fa, fb, xa: torch.Tensor, xb: torch.Tensor, device: torch.device, started=None) -> tuple:
    """Every point's activations of all the images on both sides, flattened (n x features), on the CPU; read
    in batches of `CKA_BATCH` (`started`: the first batch's, already read, and the reader of the rest)."""
    if started is None:
        reads = _reads(fa, fb, xa, xb, device)
        started = (next(reads), reads)
    first, reads = started
    parts = [first, *reads]
    return tuple(
        [torch.cat([part[side][k] for part in parts]).cpu() for k in range(len(first[side]))] for side in (0, 1)
    )


def _reads(fa, fb, xa: torch.Tensor, xb: torch.Tensor, device: torch.device):
    """Per batch of `CKA_BATCH` images, (A's flattened activations, B's), the images read in batches."""
    for ba, bb in zip(chunks(xa, CKA_BATCH), chunks(xb, CKA_BATCH)):
        with torch.no_grad():  # left before yielding: the caller's code never runs without gradients by accident
            read = tuple([t.flatten(1) for t in f(x.to(device))] for f, x in ((fa, ba), (fb, bb)))
        yield read
