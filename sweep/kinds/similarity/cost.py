"""What a similarity unit costs before it runs: its memory (`need`: its CKA estimator's, or its pairwise index's
workspace with every point's activations held) and its seconds (`price`)."""

from __future__ import annotations

from sweep.costs.memory import ALLOCATOR, F32, F64, LIVE, Need, ShapePair, forward_bytes, network_sizes
from sweep.costs.pricer import Pricer
from sweep.measures.full_cka import CKA_BATCH, cka_streams, streamed_products
from sweep.registry import INDICES


def need(spec, sweep=None) -> Need | None:
    """A similarity unit's CKA (minibatch on `batch_size` images at a time, or full on all `images`), or its
    pairwise index, OPD, SVCCA or a plugin's (every point's activations held, and the widest pair's workspace:
    the index's own model, `Index.memory`, else the generic one). Saliency: none."""
    by = INDICES[spec.measure].similarity_by
    if by == "saliency":
        return None
    big_a, sizes_a = network_sizes(spec.a_arch, spec.dataset, spec.a_points)
    big_b, sizes_b = network_sizes(spec.b_arch, spec.dataset, spec.b_points)
    same = spec.a_key == spec.b_key and spec.a_points == spec.b_points and spec.a_inputs == spec.b_inputs
    if spec.estimator == "minibatch":  # A's stacked Grams held while B's list is stacked (B is A when same)
        grams = 2 * len(sizes_a) if same else len(sizes_a) + 2 * len(sizes_b)

        def at(b: int) -> int:
            return int(ALLOCATOR * (F64 * grams * b * b + forward_bytes(max(big_a, big_b), b)))

        label, instead = f"{spec.label} (minibatch CKA)", "or read fewer points"
        return Need("similarity", label, "batch_size", spec.batch_size, at, "cka", instead)

    def whole(n: int) -> int:  # a forward of a batch, and the products or every point's activations held
        forward = int(ALLOCATOR * F32 * LIVE * min(n, CKA_BATCH) * max(big_a, big_b))
        if by == "pairwise":
            pair = ShapePair((max(sizes_a),), (max(sizes_b),), {spec.measure: "flatten"})
            held = pair.index_bytes(spec.measure, n)
            return forward + F32 * n * (sum(sizes_a) + sum(sizes_b)) + held
        if cka_streams(n, sizes_a, sizes_b):
            return forward + int(ALLOCATOR * F64 * streamed_products(sizes_a, sizes_b))
        pair = ShapePair((max(sizes_a),), (max(sizes_b),), {})
        return forward + F32 * n * (sum(sizes_a) + sum(sizes_b)) + INDICES["cka"].memory(pair, "flatten", n)

    if by == "pairwise":
        return Need("similarity", spec.label, "images", spec.images, whole, spec.measure, "or read fewer points")
    label, instead = f"{spec.label} (full CKA)", "or use estimator: minibatch"
    return Need("similarity", label, "images", spec.images, whole, "cka", instead)


def price(unit, p: Pricer) -> float:
    """A similarity unit: its images (x passes) through A and B, adversarial inputs as PGD steps; saliency,
    one step per image and model."""
    ds = unit.dataset
    if INDICES[unit.measure].similarity_by == "saliency":
        return p.unit_s + p.step(unit.a_arch, ds, unit.images) + p.step(unit.b_arch, ds, unit.images)
    images = unit.images * (unit.passes or 1)
    adv = (unit.attack_steps or 0) if "adversarial" in (unit.a_inputs, unit.b_inputs) else 0
    return (
        p.unit_s
        + p.forward(unit.a_arch, ds, images)
        + p.forward(unit.b_arch, ds, images)
        + (p.step(unit.a_arch, ds, images * adv) if adv else 0.0)
    )
