"""What a stitching trial keeps of its frozen halves (`sweep.kinds.trial.cost.held`, `Kind.held`) and what it
allocates in a batch (`working`): the planner's bytes against the activations the built networks compute, and
against what a trial run keeps in the worker cache."""

import copy
import math

import pytest
import torch

from sweep.config.space import parse_space
from sweep.costs.memory import kept
from sweep.costs.pricer import sizes
from sweep.kinds.trial.cost import held
from sweep.models.base import build, split
from sweep.registry import DATASETS
from tests.conftest import TINY_SPACE


def _space():
    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["plain_b"] = {**space["donors"]["plain_a"], "seed": 1}
    space["stitching"]["pairs"] = [{"front": "zoo:plain_a", "end": "zoo:plain_b"}]
    return parse_space(space)


def _per_image(arch: str, dataset: str, point: str) -> int:
    """Bytes of one image's activation at `point`, from the network built here (not the shapes table)."""
    info = DATASETS[dataset]
    net = build(arch, info.channels, info.num_classes, (0.5,), (0.25,), info.image_size)
    front, _ = split(net.eval(), point)
    with torch.no_grad():
        a = front(torch.zeros(1, info.channels, info.image_size, info.image_size))
    return a[0].numel() * a.element_size()


def _kept(spec, sweep, budget: int) -> int:
    return kept(list(held(spec, sweep).values()), budget)


def test_held_is_what_each_objective_reads_of_each_half_and_part_within_the_budget():
    """tlm reads the front's half on every part (the fit's training and validation images, the evaluation's test
    images); dm its fit's K images of both halves (in the worker's chunks of 250) and the front's test part."""
    sweep = _space()
    tlm, dm = (next(t for t in sweep.trials if t.front_point == "layer1.0" and t.objective == o) for o in ("tlm", "dm"))
    b = _per_image(sweep.donors["plain_a"].arch, tlm.dataset, "layer1.0")  # both donors are resnet_tiny
    train, val, test = sizes(tlm.dataset, tlm.train_size, tlm.val_size, tlm.test_size)
    assert sorted(held(tlm, sweep).values()) == sorted([b * train, b * val, b * test])
    k = min(train, 250 * -(-dm.dm_samples // 250))
    assert sorted(held(dm, sweep).values()) == sorted([b * k, b * k, b * test])
    assert _kept(tlm, sweep, budget=10**12) == b * (train + val + test)
    # a budget below the training part's activations: that part is computed per chunk, the others kept
    assert _kept(tlm, sweep, budget=b * train - 1) == b * (val + test)
    # the kept parts at most the budget in all; nothing below the smallest part
    assert _kept(tlm, sweep, budget=b * max(val, test)) == b * max(val, test)
    assert _kept(tlm, sweep, budget=b * min(val, test) - 1) == 0


def test_a_self_stitch_keeps_its_one_half_once():
    """dm from a donor onto itself at one point: its K fit images are one part, read for both sides."""
    sweep = parse_space(copy.deepcopy(TINY_SPACE))
    spec = next(t for t in sweep.trials if t.front_point == t.end_point == "layer3.1" and t.objective == "dm")
    b = _per_image(sweep.donors["plain_a"].arch, spec.dataset, "layer3.1")
    train, _, test = sizes(spec.dataset, spec.train_size, spec.val_size, spec.test_size)
    k = min(train, 250 * -(-spec.dm_samples // 250))
    assert _kept(spec, sweep, budget=10**12) == b * (k + test)


def test_trials_that_read_the_same_half_name_it_alike():
    """Two trials from one front at one point name its parts alike: a worker that runs both keeps each once
    (`stage_kept`), the most either reads of it."""
    sweep = _space()
    a, b = [t for t in sweep.trials if t.front_point == "layer1.0" and t.end_point == "layer1.0"][:2]
    assert a.objective != b.objective
    shared = set(held(a, sweep)) & set(held(b, sweep))
    assert {part[-1] for part in shared} == {"train", "test"}


@pytest.mark.slow
def test_a_trial_keeps_no_more_activations_than_held(tmp_path):
    """A tlm trial run in this process with the worker cache on: the activations its cache keeps (the frozen
    halves on the parts it reads) are at most `held`'s bytes, and most of them (a tlm fit reads every part)."""
    from sweep.kinds.donor.run import run_donor
    from sweep.kinds.trial.run import run_trial
    from sweep.store.results import SweepDir
    from sweep.worker import cache

    sweep = _space()
    spec = next(t for t in sweep.trials if t.objective == "tlm" and t.front_point == "layer1.0")
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    for name in ("plain_a", "plain_b"):
        row = run_donor(sweep.donors[name], sweep.donor_evals[name], sweep_dir, torch.device("cpu"))
        assert row["status"] == "done", row.get("error")
    worker = cache.configure({cache.DIR_ENV: str(tmp_path / "node")})
    try:
        row = run_trial(spec, sweep_dir)
        assert row["status"] == "done", row.get("error")
        in_cache = sum(
            math.prod(v.shape) * v.element_size()
            for k, (v, _) in worker._entries.items()
            if k[0] == "activations" and "logits" not in k  # the donors' predictions, if computed here
        )
    finally:
        cache.configure()
    assert 0.5 * _kept(spec, sweep, cache.memory_budget()) <= in_cache <= _kept(spec, sweep, cache.memory_budget())
