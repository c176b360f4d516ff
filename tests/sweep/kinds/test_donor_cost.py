"""What a donor unit keeps of the frozen halves its evaluation's pass fills (`sweep.kinds.donor.cost.held`): the
planner's bytes against the activations the built network computes, under the names the trials read them by."""

import copy

import torch

from sweep.config.space import parse_space
from sweep.costs.pricer import sizes
from sweep.kinds.donor.cost import held
from sweep.kinds.trial.cost import held as trial_held
from sweep.models.base import build, split
from sweep.registry import DATASETS, KINDS
from tests.conftest import TINY_SPACE


def _per_image(arch: str, dataset: str, point: str) -> int:
    info = DATASETS[dataset]
    net = build(arch, info.channels, info.num_classes, (0.5,), (0.25,), info.image_size)
    with torch.no_grad():
        a = split(net.eval(), point)[0](torch.zeros(1, info.channels, info.image_size, info.image_size))
    return a[0].numel() * a.element_size()


def test_a_donor_unit_keeps_each_filled_half_on_the_trials_test_images():
    sweep = parse_space(copy.deepcopy(TINY_SPACE))
    (work,) = KINDS["donor"].units(sweep).values()
    points = {f.point for f in work.fills}
    assert points == {"layer1.0", "layer3.1"}  # the trials' front and end points of the one donor
    spec = sweep.trials[0]
    test = sizes(spec.dataset, spec.train_size, spec.val_size, spec.test_size)[2]
    expected = {p: test * _per_image("resnet_tiny", spec.dataset, p) for p in points}
    parts = held(work, sweep)
    assert sorted(parts.values()) == sorted(expected.values())
    # the trials name their test parts alike: a worker that runs the donor unit and the trials keeps them once
    trials = {k: v for t in sweep.trials for k, v in trial_held(t, sweep).items() if k[-1] == "test"}
    assert parts == {k: v for k, v in trials.items() if k in parts} and set(parts) <= set(trials)
