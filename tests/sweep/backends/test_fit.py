"""How many units `run` puts on its nodes at once by memory (`sweep.backends.fit`): the pure count, the line
it prints when it lowers Tune's concurrency, and the refusal of a unit that fits on no node, before Ray runs
anything."""

import pytest

from sweep.backends import fit
from sweep.config.errors import SpecError
from sweep.config.space import load_space
from sweep.costs.memory import GiB

SPACE = "search_spaces/tlm_vs_dm_fmnist.yaml"


def _plan(sweep) -> dict:
    from sweep.registry import KINDS

    return {name: list(kind.units(sweep)) for name, kind in KINDS.items()}


@pytest.mark.parametrize(
    "nodes, resources, unit, want",
    [
        ([{"CPU": 16, "memory": 20 * GiB}], {"cpu": 1, "gpu": 0}, 2 * GiB, 10),  # memory binds
        ([{"CPU": 4, "memory": 20 * GiB}], {"cpu": 1, "gpu": 0}, 2 * GiB, 4),  # CPUs bind
        ([{"CPU": 8, "GPU": 1, "memory": 64 * GiB}], {"cpu": 1, "gpu": 0.5}, GiB, 2),  # the GPU binds
        ([{"CPU": 8, "memory": 5 * GiB}, {"CPU": 8, "memory": 9 * GiB}], {"cpu": 1, "gpu": 0}, 3 * GiB, 4),  # 1+3
        ([{"CPU": 8, "memory": 2 * GiB}], {"cpu": 1, "gpu": 0}, 3 * GiB, 0),  # fits no node
    ],
)
def test_concurrency_is_what_each_node_holds_summed(nodes, resources, unit, want):
    assert fit.concurrency(nodes, resources, unit) == want


def test_run_lowers_its_concurrency_to_what_the_nodes_memory_holds(capsys):
    sweep = load_space(SPACE)
    need = fit.largest(sweep, _plan(sweep))
    nodes = [{"CPU": 16.0, "memory": 3.5 * need.bytes}]
    resources, at_once = fit.fitted(sweep, _plan(sweep), nodes, None)
    assert at_once == 3 and resources["cpu"] == sweep.cpus_per_trial and "memory" not in resources
    out = capsys.readouterr().out
    assert out.startswith("memory: 3 units at once, not 16: the nodes' memory holds 3 of") and out.count("\n") == 1
    _, at_once = fit.fitted(sweep, _plan(sweep), [{"CPU": 2.0, "memory": 64 * GiB}], None)
    assert at_once == 2 and capsys.readouterr().out == ""  # not lowered: nothing said


def test_a_unit_that_fits_on_no_node_is_refused_naming_memory_per_trial_and_the_batch_sizes():
    sweep = load_space(SPACE)
    need = fit.largest(sweep, _plan(sweep))
    with pytest.raises(SpecError) as caught:
        fit.fitted(sweep, _plan(sweep), [{"CPU": 16.0, "memory": need.bytes - 1}], None)
    assert caught.value.field == "resources.memory_per_trial"
    text = str(caught.value)
    assert "lower the batch sizes" in text and "similarity_samples = " in text and "needs about" in text


def test_memory_per_trial_when_set_is_the_units_size():
    sweep = load_space(SPACE)
    sweep = type(sweep)(**{**sweep.__dict__, "memory_per_trial": 4.0}) if hasattr(sweep, "__dict__") else sweep
    _, at_once = fit.fitted(sweep, _plan(sweep), [{"CPU": 16.0, "memory": 10 * GiB}], None)
    assert at_once == 2


def test_nothing_planned_is_not_fitted():
    sweep = load_space(SPACE)
    _, at_once = fit.fitted(sweep, {}, [{"CPU": 2.0, "memory": 1.0}], 5)
    assert at_once == 5
