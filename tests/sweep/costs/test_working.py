"""A unit's working memory (`sweep.costs.working`, `Kind.working`): the planned bytes of a gradient step against the
tensors autograd saves for its backward in the built network (an independent count: the tensors a backward keeps
alive, the model's weights left out), and each kind's choice of its largest step."""

import copy

import pytest
import torch

from sweep.config.space import parse_space
from sweep.costs.working import ATTACK_BATCH, FIT, fit_bytes, flowing, forward_bytes
from sweep.models.base import build, split
from sweep.registry import DATASETS
from tests.conftest import TINY_SPACE


def _saved(arch: str, dataset: str, point: str | None, batch: int) -> int:
    """Bytes of the distinct tensors autograd saves in a step from `point` (None: from the images, training)."""
    info = DATASETS[dataset]
    net = build(arch, info.channels, info.num_classes, (0.5,), (0.25,), info.image_size)
    weights = {t.untyped_storage().data_ptr() for t in [*net.parameters(), *net.buffers()]}
    x = torch.rand(batch, info.channels, info.image_size, info.image_size)
    if point is None:
        model = net.train()
    else:
        net.eval().requires_grad_(False)
        front, model = split(net, point)
        with torch.no_grad():
            x = front(x)
        x.requires_grad_(True)
    seen: dict[int, int] = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in weights:
            seen[ptr] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x).logsumexp(1).sum().backward()
    return sum(seen.values())


@pytest.mark.parametrize("point", ["layer1.0", "layer2.0", "layer3.1", None])
def test_a_gradient_step_is_planned_above_what_autograd_saves_and_within_the_factor(point):
    """Saved tensors are 0.9-3.7x the flowing activations on the shipped networks (`fit_memory.py` measures the
    peak, 4.5-8x): the plan is at least what is saved and at most `FIT` / 0.9 times it. Summing the points before
    the stitch point instead of after it breaks one bound or the other."""
    arch, dataset, batch = "resnet_tiny", "digits", 16
    saved, planned = _saved(arch, dataset, point, batch), fit_bytes(arch, dataset, point, batch)
    assert saved <= planned <= FIT / 0.9 * saved, (point, saved, planned)
    assert planned == FIT * flowing(arch, dataset, point, 1) * batch


def test_a_forward_pass_is_its_largest_activation_times_live():
    """The largest of the built network's activations at its stitch points and its input image."""
    info = DATASETS["digits"]
    net = build("resnet_tiny", info.channels, info.num_classes, (0.5,), (0.25,), info.image_size).eval()
    x = torch.rand(1, info.channels, info.image_size, info.image_size)
    with torch.no_grad():
        largest = max([x.numel()] + [split(net, p)[0](x).numel() for p in net.stitch_points])
    assert forward_bytes("resnet_tiny", "digits", 10) == 4 * 4 * 10 * largest


def _trial(objective: str, **changes):
    raw = copy.deepcopy(TINY_SPACE)
    raw["stitching"].update(changes)
    sweep = parse_space(raw)
    return next(t for t in sweep.trials if t.objective == objective and t.front_point == "layer1.0"), sweep


def test_a_trials_working_memory_is_its_largest_step():
    from sweep.kinds.trial.cost import working

    tlm, sweep = _trial("tlm")
    dm, _ = _trial("dm")
    robust = min(tlm.n_eval_robust, ATTACK_BATCH)
    attack = fit_bytes("resnet_tiny", "digits", None, robust) + fit_bytes("resnet_tiny", "digits", None, 1) * robust
    fit = fit_bytes("resnet_tiny", "digits", "layer1.0", tlm.batch_size)
    assert working(tlm, sweep) == max(fit, attack, forward_bytes("resnet_tiny", "digits"))
    assert working(dm, sweep) == max(attack, forward_bytes("resnet_tiny", "digits"))  # dm: least squares, no step
    bigger, sweep = _trial("tlm", batch_size=4 * tlm.batch_size)
    assert working(bigger, sweep) > working(tlm, sweep)


def test_working_memory_is_counted_on_the_cpu_only():
    from sweep.planning.worker_memory import unit_needs

    raw = copy.deepcopy(TINY_SPACE)
    cpu = unit_needs(parse_space(raw))
    raw["resources"] = {"gpus_per_trial": 1}
    gpu = unit_needs(parse_space(raw))
    for kind in ("trial", "donor"):
        assert cpu[kind].working > 0 and gpu[kind].working == 0
        # the larger of the indices' workspace and the working memory (phases one after the other)
        assert cpu[kind].bytes - gpu[kind].bytes == max(cpu[kind].working - cpu[kind].indices, 0)
    assert cpu["donor"].bytes > gpu["donor"].bytes
