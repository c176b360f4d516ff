"""What a donor unit costs under a cost profile (`Kind.price`): its training, and each evaluation's pass and attack;
the frozen halves that pass fills for the trials are noted in the pricer (`Pricer.fills`), so the trials that
read them pay nothing for them."""

from __future__ import annotations

import math

from sweep.costs.memory import F32
from sweep.costs.pricer import Pricer, attack_seconds, sizes


def held(work, sweep) -> dict[tuple, int]:
    """The frozen halves' activations a donor unit keeps through the worker cache (`Kind.held`): each half its
    evaluation's pass fills for the trials (`DonorWork.fills`) on their test images, in the precision they read
    (2 bytes a number below fp32), in bytes, by the names the trials read them under (`sweep.worker.feed`); the
    worker keeps those that fit its budget (`sweep.costs.memory.kept`)."""
    from sweep.config.shapes import activation_shape

    d, out = work.donor, {}
    for f in work.fills:
        split = sizes(*f.data)
        n = split[2] * math.prod(activation_shape(d.arch, f.data[0], f.point))
        where = (d.donor_key, f.point, f.data[0], split, "test")
        out[where if f.precision == "fp32" else (*where, f.precision)] = n * (F32 if f.precision == "fp32" else 2)
    return out


def working(work, sweep) -> int:
    """A donor unit's working memory on the CPU (`Kind.working`, `sweep.costs.working`): the largest of its
    training step (the whole network in `batch_size`, a zoo donor trained here; an adversarial method's validation
    attack in `ATTACK_BATCH`), its evaluations' forward and a robust evaluation's attack (gradients through the
    network on its batch)."""
    from sweep.costs.working import ATTACK_BATCH, fit_bytes, forward_bytes

    d = work.donor
    if not d.network:
        return 0
    ds = d.data.dataset
    out = [forward_bytes(d.arch, ev.dataset) for ev in work.evaluations] or [forward_bytes(d.arch, ds)]
    if d.source == "zoo" and d.batch_size:
        out.append(fit_bytes(d.arch, ds, None, d.batch_size))
        if d.training not in (None, "plain"):  # its adversarial validation's attack, in batches of its own
            out.append(fit_bytes(d.arch, ds, None, ATTACK_BATCH))
    out += [
        fit_bytes(d.arch, ev.dataset, None, min(ev.n_eval_robust, ATTACK_BATCH))
        for ev in work.evaluations
        if ev.n_eval_robust
    ]
    return max(out)


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
