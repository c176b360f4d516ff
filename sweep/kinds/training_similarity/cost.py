"""What a unit of CKA across training epochs costs before it runs: its memory (`need`) and its seconds (`price`)."""

from __future__ import annotations

from sweep.costs.memory import ALLOCATOR, F64, Need, forward_bytes, network_sizes
from sweep.costs.pricer import Pricer


def need(spec, sweep=None) -> Need:
    """CKA across epochs: per batch, the Grams of every kept epoch at every point (and one point's stacked over
    the epochs), one model's forward at a time."""
    largest, _ = network_sizes(spec.arch, spec.dataset, spec.points)
    grams = len(spec.epochs) * (len(spec.points) + 1)

    def at(b: int) -> int:
        return int(ALLOCATOR * (F64 * grams * b * b + forward_bytes(largest, b)))

    return Need("training_similarity", spec.label, "batch_size", spec.batch_size, at, "cka", "or keep fewer epochs")


def price(unit, p: Pricer) -> float:
    """CKA across epochs: the images (x passes) through each kept epoch's model."""
    images = unit.images * unit.passes * len(unit.epochs)
    adv = unit.attack_steps or 0 if unit.inputs == "adversarial" else 0
    return p.unit_s + p.forward(unit.arch, unit.dataset, images) + p.step(unit.arch, unit.dataset, images * adv)
