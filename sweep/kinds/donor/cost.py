"""What a donor unit costs under a cost profile (`Kind.price`): its training, and each evaluation's pass and attack;
the frozen halves that pass fills for the trials are noted in the pricer (`Pricer.fills`), so the trials that
read them pay nothing for them."""

from __future__ import annotations

from sweep.costs.pricer import Pricer, attack_seconds, sizes


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
