"""What a t-SNE unit costs before it runs: its memory (`need`) and its seconds (`price`)."""

from __future__ import annotations

from sweep.costs.memory import ALLOCATOR, F32, F64, LIVE, Need, network_sizes
from sweep.costs.pricer import Pricer
from sweep.measures.full_cka import CKA_BATCH


def need(spec, sweep=None) -> Need:
    """A t-SNE unit: every point's activations of its images (float32), and scikit-learn's float64 copy and
    PCA initialisation of one point's (3 copies), after a forward of 250 images at a time."""
    largest, sizes = network_sizes(spec.arch, spec.dataset, spec.points)

    def at(n: int) -> int:
        forward = F32 * LIVE * min(n, CKA_BATCH) * largest
        return int(ALLOCATOR * (forward + F32 * n * sum(sizes) + 3 * F64 * n * max(sizes)))

    return Need("tsne", spec.label, "images", spec.images, at, "t-SNE", "or embed fewer points")


def price(unit, p: Pricer) -> float:
    """A t-SNE unit: the forward passes; t-SNE itself (scikit-learn, on the CPU) is not priced."""
    return p.unit_s + p.forward(unit.arch, unit.dataset, unit.images)
