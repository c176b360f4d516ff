"""What a donor unit costs under a cost profile (`Kind.price`): its training, and each evaluation's pass and attack;
the frozen halves that pass fills for the trials are noted in the pricer (`Pricer.fills`), so the trials that
read them pay nothing for them."""

from __future__ import annotations

import math

from sweep.costs.memory import F32, kept
from sweep.costs.pricer import Pricer, attack_seconds, sizes


def held(work, sweep, budget: int | None = None) -> int:
    """The bytes of the frozen halves' activations a donor unit keeps at most (`Kind.held`): each half its
    evaluation's pass fills for the trials (`DonorWork.fills`) on their test images, in the precision they read
    (2 bytes a number below fp32), while a half fits the worker cache's memory budget (`budget`, default: the
    environment's), in all at most the budget (`sweep.worker.feed`)."""
    from sweep.config.shapes import activation_shape
    from sweep.worker.cache import memory_budget

    budget = memory_budget() if budget is None else budget
    d = work.donor
    halves = {(f.point, f.data, f.precision, f.channels_last) for f in work.fills}
    parts = [
        sizes(*data)[2] * math.prod(activation_shape(d.arch, data[0], point)) * (F32 if precision == "fp32" else 2)
        for point, data, precision, _ in halves
    ]
    return kept(parts, budget)


def price(work, p: Pricer) -> float:
    d = work.donor
    secs = 0.0
    if d.source == "zoo" and d.noise_sigma is None:
        train, _, _ = sizes(d.data.dataset, d.data.train_size, d.data.val_size, d.data.test_size)
        passes = 1 + (d.steps or 0) if d.training not in (None, "plain") else 1
        secs += p.step(d.arch, d.data.dataset, (d.epochs or 0) * train * passes)
    if d.noise_sigma is not None:
        return p.unit_s
    for f in work.fills if p.fills is not None else ():  # the evaluation's pass fills them (`sweep.worker.feed`)
        split = sizes(*f.data)
        p.fills[(d.donor_key, f.point, f.data[0], split, "test")] = split[2]
    for ev in work.evaluations:
        robust = attack_seconds(p, d.arch, ev.dataset, ev.n_eval_robust, ev.attacks, ev.iterations, ev.restarts)
        secs += p.forward(d.arch, ev.dataset, ev.test_size) + robust
    return secs + p.unit_s
