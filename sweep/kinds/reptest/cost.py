"""What a representation-test unit costs before it runs: its memory (`need`) and its seconds (`price`)."""

from __future__ import annotations

import math

from sweep.config.shapes import activation_shape
from sweep.costs.memory import ALLOCATOR, F32, F64, Need, ShapePair, index_need
from sweep.costs.pricer import Pricer

# A low-rank basis (`LowRank`: the centred SVD of float64 channel rows) peaks at this many times its rows above the
# float32 activations it is given: its rows, their U and LAPACK's workspace (3.27-3.60 measured on five shapes and
# sizes, `tests/benchmarks/lowrank_memory.py`)
LOWRANK = 3.6


def need(spec, sweep=None) -> Need | None:
    """A representation test's need: its largest pair of members (they share one architecture), or its linear
    probes where they hold more (each member's features of `probe_train_size` training and `samples` test
    images, their standardised copies and a temporary: `sweep.measures.probing`), or a low-rank member's basis
    (its layer's activations on `probe_train_size` images and their SVD, `LOWRANK`)."""
    shapes = {activation_shape(spec.arch, spec.dataset, layer) for _, _, layer, _ in spec.members}
    needs = [
        index_need(
            "reptest", spec.label, "samples", spec.samples, ShapePair(a, b, {}), spec.indices, spec.dm_samples, False
        )
        for a in shapes
        for b in shapes
    ]
    widest = max(math.prod(s) for s in shapes)

    def probe(m: int) -> int:
        return int(ALLOCATOR * 3 * F32 * (m + spec.samples) * widest)

    needs.append(
        Need("reptest", spec.label, "probe_train_size", spec.probe_train_size, probe, "probe", "or lower samples")
    )
    ranked = [math.prod(activation_shape(spec.arch, spec.dataset, layer)) for _, _, layer, r in spec.members if r]
    if ranked:  # a low-rank member's basis: the SVD of its layer's channel rows on the probe's training images

        def basis(m: int) -> int:
            return int((F32 + LOWRANK * F64) * m * max(ranked))

        low = "or test a layer with fewer activations"
        m = spec.probe_train_size
        needs.append(Need("reptest", spec.label, "probe_train_size", m, basis, "low-rank basis", low))
    return max((x for x in needs if x), key=lambda x: x.bytes)


def working(spec, sweep=None) -> int:
    """A representation test's working memory on the CPU (`Kind.working`): a forward pass of its network in a
    batch (its members' fronts on the probe's and the test images, `sweep.costs.working`)."""
    from sweep.costs.working import forward_bytes

    return forward_bytes(spec.arch, spec.dataset)


def price(unit, p: Pricer) -> float:
    """A representation-test unit: each member (`_member_seconds`)."""
    return p.unit_s + sum(_member_seconds(unit, member, p) for member in unit.members)


def _member_seconds(unit, member, p: Pricer) -> float:
    """One member of a representation test: its front on the probe's training images, twice on the test
    images (probe, indices) and on the K fit images; its linear probe (`probe_epochs` x images x features x
    classes multiply-adds, forward and backward: 3, priced at the float64 rate, an upper bound); its indices
    against the reference (taken of the member's own shape: the reference is chosen as the unit runs)."""
    from sweep.config.shapes import activation_shape
    from sweep.costs.memory import ShapePair
    from sweep.costs.work import Work, pair_work
    from sweep.registry import DATASETS

    layer, ds = member[2], unit.dataset
    images = unit.probe_train_size + 2 * unit.samples + unit.dm_samples
    shape = activation_shape(unit.arch, ds, layer)
    probe = Work(mac=3 * unit.probe_epochs * unit.probe_train_size * math.prod(shape) * DATASETS[ds].num_classes)
    indices = pair_work(ShapePair(shape, shape, {}), unit.indices, unit.samples, unit.dm_samples)
    return p.forward(unit.arch, ds, images, upto=layer) + p.algebra(probe + indices)
