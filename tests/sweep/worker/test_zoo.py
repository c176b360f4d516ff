"""What a stitching trial does to the donors `load_donor` hands it (`sweep.worker.zoo`): whether a unit leaves
a donor's state (parameters, BatchNorm running statistics) and memory format as they were, per objective. Where
it does (every shipped objective, `donor_bn` not `update`, `channels_last` off), the trial is handed the donors
the worker's cache holds (`shared=True`), not copies; where it does not, copies."""

import copy
import dataclasses

import pytest
import torch

from sweep.config.space import parse_space
from sweep.kinds.donor.run import run_donor
from sweep.kinds.trial import run as trial_run
from sweep.registry import OBJECTIVES
from sweep.store.results import SweepDir
from tests.conftest import TINY_SPACE

SHIPPED = ["tlm", "dm+tlm", "dm", "slm", "fula", "adv", "adv_mix", "trades"]


@pytest.fixture
def settings(tmp_path):
    """`settings(**env)`: this process's worker cache reconfigured for one test, restored afterwards."""
    from sweep.worker import cache

    def set_(**env):
        return cache.configure({cache.DIR_ENV: str(tmp_path / "node"), **env})

    yield set_
    cache.configure()


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    sweep = parse_space(copy.deepcopy(TINY_SPACE))
    sweep_dir = SweepDir(tmp_path_factory.mktemp("results"), sweep.name)
    sweep_dir.create()
    row = run_donor(sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, torch.device("cpu"))
    assert row["status"] == "done", row.get("error")
    return sweep, sweep_dir


def _state(model: torch.nn.Module) -> tuple[dict, list[bool]]:
    """Every tensor of the state (parameters and buffers), and whether each 4-d tensor is channels-last."""
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    layout = [p.is_contiguous(memory_format=torch.channels_last) for p in model.parameters() if p.dim() == 4]
    return state, layout


def _run_watched(spec, sweep_dir, monkeypatch, shared: list | None = None) -> list[tuple]:
    """Run the trial; for each donor it loaded: (its state and layout before, the model); `shared` collects
    whether each was asked for as the worker's own (`load_donor(shared=True)`)."""
    loaded, load = [], trial_run.load_donor

    def watched(*args, **kwargs):
        model = load(*args, **kwargs)
        loaded.append((_state(model), model))
        if shared is not None:
            shared.append(kwargs.get("shared", False))
        return model

    monkeypatch.setattr(trial_run, "load_donor", watched)
    row = trial_run.run_trial(spec, sweep_dir)
    assert row["status"] == "done", row.get("error")
    return loaded


def _unchanged(loaded) -> bool:
    for (state, layout), model in loaded:
        now, now_layout = _state(model)
        if now_layout != layout or any(not torch.equal(state[k], now[k]) for k in state):
            return False
    return True


def _spec(sweep, objective: str, **changes):
    base = next(t for t in sweep.trials if t.objective == "tlm")
    extra = {"params": tuple((o.key, o.default) for o in OBJECTIVES[objective].params)}
    if objective in ("adv", "adv_mix", "trades"):
        extra.update(adv_eps=0.3, adv_step_size=0.1, adv_steps=1, adv_random_start=objective != "adv_mix")
        extra.update(alpha=0.5) if objective != "trades" else extra.update(beta=1.0)
    if objective == "dm":
        extra.update(init=None, donor_bn=None)  # fields dm does not read are blanked in its trials
    return dataclasses.replace(base, objective=objective, epochs=1, **extra, **changes)


@pytest.mark.slow
@pytest.mark.parametrize("objective", SHIPPED)
def test_a_trial_leaves_its_donors_unchanged_and_is_handed_the_worker_s_own(zoo, objective, monkeypatch):
    """Every shipped objective, with the robust evaluation on (PGD through the stitched network): the donors'
    parameters, statistics and layout are as loaded after the unit, and the trial asked for the cached ones."""
    sweep, sweep_dir = zoo
    shared = []
    assert _unchanged(_run_watched(_spec(sweep, objective, n_eval_robust=16), sweep_dir, monkeypatch, shared))
    assert OBJECTIVES[objective].leaves_donors and shared == [True, True]


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["dm", "tlm"])
def test_a_cross_layer_self_stitch_on_the_shared_donor_leaves_it_unchanged(zoo, objective, monkeypatch, settings):
    """Front and end are one cached donor (the same object): computing g<=j's activations (j = layer2.0) in the
    trial must leave every stage's mode as it was, or `layer1.1`, in neither f<=layer1.0 nor g>j, is left in
    training mode and a later pass through g<=j moves the shared donor's statistics."""
    _, sweep_dir = zoo
    settings()  # the cache on: both loads hand out the one kept donor
    space = copy.deepcopy(TINY_SPACE)
    space["stitching"].update(stitch_points=["layer1.0"], end_points=["layer2.0"], objectives=[objective])
    space["stitching"].update(indices=["cka", "dm"], similarity_samples=300)
    space["evaluation"]["n_eval_robust"] = 0
    (spec,) = parse_space(space).trials  # the indices read g<=j's activations in the trial
    shared = []
    loaded = _run_watched(spec, sweep_dir, monkeypatch, shared)
    assert loaded[0][1] is loaded[1][1] and shared == [True, True]
    assert _unchanged(loaded) and not any(m.training for m in loaded[0][1].modules())


@pytest.mark.slow
@pytest.mark.parametrize("changes", [{"donor_bn": "update"}])
def test_a_trial_that_moves_statistics_changes_its_donor(zoo, changes, monkeypatch):
    """Where the zoo must copy: `donor_bn: update` moves the running statistics, so the trial asks for copies."""
    sweep, sweep_dir = zoo
    shared = []
    assert not _unchanged(_run_watched(_spec(sweep, "tlm", **changes), sweep_dir, monkeypatch, shared))
    assert shared == [False, False]


def test_only_an_objective_that_leaves_its_donors_and_no_layout_change_shares_them():
    from sweep.kinds.trial.run import shares_donors

    sweep = parse_space(copy.deepcopy(TINY_SPACE))
    tlm = _spec(sweep, "tlm")
    assert shares_donors(tlm) and shares_donors(_spec(sweep, "dm"))
    assert not shares_donors(dataclasses.replace(tlm, donor_bn="update"))
    assert not shares_donors(dataclasses.replace(tlm, channels_last=True))
    from sweep.stitching.declared import GRADIENT_FIELDS, register_objective

    fit = "sweep.stitching.objectives:fit_task_loss"
    register_objective("copied", GRADIENT_FIELDS, "a plugin's, declaring nothing")(fit)
    try:
        assert not shares_donors(dataclasses.replace(tlm, objective="copied"))  # a plugin's: copies by default
    finally:
        OBJECTIVES.remove("copied")
