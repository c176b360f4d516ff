"""Extending the engine the way a user's own module would: an index and an objective registered in-process
(through the registries alone, in a fixture, no Ray) are validated, hashed into the ids, computed, written
with the columns their catalogue entry declares, and reported, without an edit to any other file."""

import copy
import sys

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

import analysis
from analysis.matrices import available_measures
from analysis.report import write_report
from analysis.stats import rank_correlations
from analysis.store.catalogue import INDEX_CATALOGUE, IndexEntry
from analysis.store.schema import reptest_schema, trial_schema
from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.data.core import make_splits
from sweep.kinds.donor import load_donor, run_donor
from sweep.kinds.reptest import run_reptest
from sweep.kinds.stitch import run_trial
from sweep.measures.indices import Index
from sweep.models.base import split
from sweep.registry import INDICES, OBJECTIVES
from sweep.results import SweepDir
from sweep.stitching.objectives import Objective, direct_match

from .conftest import TINY_SPACE


def _first_minus_last(a, b) -> float:
    """A stand-in index that tells its two arguments apart: the sum of the sender's first feature minus the
    sum of the target's last, over the examples."""
    return float(a[:, 0].sum() - b[:, -1].sum())


@pytest.fixture
def dummy(registered):
    """The index `dummy` (a distance, with a representation-test column) and the objective `dm_copy`,
    registered for one test and removed afterwards."""
    entry = IndexEntry("dummy", ("sim_dummy",), "dummy", "distance", reptest_column="d_dummy")
    registered(INDEX_CATALOGUE, "dummy", entry)
    registered(INDICES, "dummy", Index(entry, _first_minus_last, "flatten"))
    registered(OBJECTIVES, "dm_copy", Objective("dm_copy", direct_match, frozenset({"dm_samples"}), "test"))
    return entry


def test_the_catalogue_gives_a_registered_index_its_columns(dummy):
    assert trial_schema().field("sim_dummy").type == "double"
    assert "d_dummy" in reptest_schema().names


@pytest.mark.slow
def test_a_registered_index_and_objective_are_validated_hashed_computed_written_and_reported(tmp_path, dummy):
    space = copy.deepcopy(TINY_SPACE)
    space["stitching"].update(
        objectives=["dm_copy"], stitch_points=["layer2.0", "layer3.1"], end_points=["layer2.0", "layer3.1"]
    )
    space["stitching"]["indices"] = ["cka", "dummy"]
    space["evaluation"]["n_eval_robust"] = 0
    with pytest.raises(SpecError, match=r"stitching.indices\[1\].*did you mean 'dummy'"):
        parse_space(dict(space, stitching=dict(space["stitching"], indices=["cka", "dumy"])))
    sweep = parse_space(space)
    without = parse_space(dict(space, stitching=dict(space["stitching"], indices=["cka"])))
    assert not {t.trial_id for t in sweep.trials} & {t.trial_id for t in without.trials}  # part of identity

    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    run_donor(sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, torch.device("cpu"))
    rows = [run_trial(t, sweep_dir) for t in sweep.trials]
    assert [r["status"] for r in rows] == ["done"] * 4, [r.get("error") for r in rows]

    # computed on the right pair: f<=i (sender) and g<=j (target) on the first similarity_samples test images
    t = next(t for t in sweep.trials if t.front_point != t.end_point)
    model = load_donor(sweep_dir, t.front_key, torch.device("cpu"))
    images = make_splits(t.dataset, t.train_size, t.val_size, t.test_size).test_x[: t.similarity_samples]
    with torch.no_grad():
        sender = split(model, t.front_point)[0].eval()(images).flatten(1).double()
        target = split(model, t.end_point)[0].eval()(images).flatten(1).double()
    assert rows[sweep.trials.index(t)]["sim_dummy"] == pytest.approx(_first_minus_last(sender, target), rel=1e-6)
    part = pq.read_schema(sweep_dir.trial_part(t.trial_id).path)
    assert "sim_dummy" in part.names  # written: the column came from the catalogue entry

    trials = analysis.load_trials(sweep_dir.path)
    assert trials["sim_dummy"].notna().all() and set(trials["objective"]) == {"dm_copy"}
    assert "dummy" in available_measures(trials) and "dm_copy" in available_measures(trials)
    write_report(sweep_dir.path, tmp_path / "report")
    identification = pd.read_csv(tmp_path / "report" / "layer_identification.csv")
    assert {"dummy", "dm_copy", "cka"} <= set(identification["measure"])
    matrices = pd.read_csv(tmp_path / "report" / "layer_matrices.csv")
    dummy_cells = matrices[matrices["measure"] == "dummy"].set_index(["front_point", "end_point"])["value"]
    assert len(dummy_cells) == 4
    assert dummy_cells[(t.front_point, t.end_point)] == pytest.approx(rows[sweep.trials.index(t)]["sim_dummy"])


@pytest.mark.slow
def test_a_registered_index_takes_part_in_representation_tests(tmp_path, dummy):
    space = copy.deepcopy(TINY_SPACE)
    del space["stitching"]
    space["evaluation"]["n_eval_robust"] = 0
    space["representation_tests"] = [
        {
            "test": "sensitivity",
            "donors": ["zoo:plain_a"],
            "layers": ["layer3.1"],
            "ranks": [4, 1],
            "samples": 100,
            "indices": ["cka", "dummy"],
            "probe": {"train_size": 200, "epochs": 2, "lr": 0.01},
        }
    ]
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    run_donor(sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, torch.device("cpu"))
    (unit,) = sweep.reptests
    assert run_reptest(unit, sweep_dir, torch.device("cpu"))["status"] == "done"
    reps = analysis.load_reptests(sweep_dir.path)
    assert reps["d_dummy"].notna().all() and reps["d_pwcca"].isna().all()  # only what was requested
    reference = reps[reps["reference"]]
    assert reference["d_cka"].abs().max() < 1e-9  # d(A, A) of a similarity index is 1 - 1
    assert set(rank_correlations(reps)["index"]) == {"cka", "dummy", "dm (func.)"}  # functional DM: on by default


# A kind of work registered by a test: its section `echo: {count: N}` makes N units, each of which writes one
# row with its number doubled.
def _echo_parse(raw, ctx):
    from sweep.config.fields import Option, Section

    return tuple(range(Section(raw, "echo", {"count"}).read(Option("count", "integer", low=1))))


def _echo_parts(sweep_dir, unit):
    return [sweep_dir.path / "echo" / f"echo-{unit}.parquet"]


def _echo_run(unit, ctx):
    from sweep.results import write_rows

    (part,) = _echo_parts(ctx.sweep_dir, unit)
    if unit == 2 and not (ctx.sweep_dir.path / "echo-fixed").exists():
        row = {"unit": unit, "status": "failed", "error": "RuntimeError: echo 2 fails until fixed", "value": None}
    else:
        row = {"unit": unit, "status": "done", "error": None, "value": 2 * unit}
    schema = pa.schema([("unit", pa.int64()), ("status", pa.string()), ("error", pa.string()), ("value", pa.int64())])
    write_rows(part, [row], schema)
    return row


@pytest.fixture
def echo_kind(registered):
    from sweep.kinds.base import Kind
    from sweep.registry import KINDS

    list(KINDS)  # the built-in kinds first
    return registered(
        KINDS,
        "echo",
        Kind(
            "echo",
            "echo",
            "echo units",
            "echo",
            _echo_parts,
            _echo_run,
            lambda u: f"echo {u}",
            section="echo",
            parse=_echo_parse,
            unit_id=lambda u: f"echo-{u}",
            after=("donor",),
        ),
    )


@pytest.mark.ray
@pytest.mark.slow
def test_a_registered_kind_is_planned_scheduled_by_ray_and_reported_by_status(tmp_path, echo_kind, capsys):
    """A kind of work that only this test knows: its section of the search space is parsed into units (a bad
    one refused naming the field), the planner finds its pending units, the Ray backend runs them with the
    same machinery as every kind (its run function travels to the workers), `status` counts them, and
    `--failed` reruns the failed one."""
    import cloudpickle

    from sweep import planning
    from sweep.backends.ray import run_stages
    from sweep.status import print_status

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test module
    with pytest.raises(SpecError, match=r"^echo.count: expected an integer >= 1"):
        parse_space(dict(copy.deepcopy(TINY_SPACE), echo={"count": 0}))
    sweep = parse_space(dict(copy.deepcopy(TINY_SPACE), echo={"count": 3}))
    assert sweep.units["echo"] == (0, 1, 2)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    plan = planning.to_run(sweep, sweep_dir, retry_failed=False)
    assert plan["echo"] == ["echo-0", "echo-1", "echo-2"] and plan["donor"] == ["plain_a"]
    run_stages(sweep, sweep_dir, {"echo": plan["echo"]}, num_cpus=2)
    prog = planning.progress(sweep, sweep_dir)["echo"]
    assert (prog.done, prog.failed, prog.pending) == (["echo-0", "echo-1"], ["echo-2"], [])
    values = pq.read_table(sweep_dir.path / "echo").to_pandas().set_index("unit")["value"]
    assert values[0] == 0 and values[1] == 2
    assert not print_status(sweep, sweep_dir)
    out = capsys.readouterr().out
    assert "3 echo units: 2 done, 1 failed, 0 pending" in out and "echo 2 fails until fixed" in out

    assert planning.to_run(sweep, sweep_dir, retry_failed=False)["echo"] == []  # failed stays failed...
    (sweep_dir.path / "echo-fixed").write_text("")
    again = planning.to_run(sweep, sweep_dir, retry_failed=True)["echo"]  # ... until --failed
    assert again == ["echo-2"]
    run_stages(sweep, sweep_dir, {"echo": again}, num_cpus=2)
    assert planning.progress(sweep, sweep_dir)["echo"].done == ["echo-0", "echo-1", "echo-2"]


@pytest.mark.slow
def test_an_objective_with_its_own_parameter_is_one_registry_entry(tmp_path, registered):
    """An objective that declares a parameter of its own (type, default, bounds): blocks accept it, validate
    it, hash it into its trials' ids (the default too), hand it to `fit` and record it; other objectives'
    trials keep their ids; a block that sets it without choosing the objective is refused."""
    from sweep.config.fields import Option

    def fit(ctx):
        out = direct_match(ctx)
        ctx.curves.append((0, "gamma_seen", ctx.params["gamma"]))
        return out

    gamma = Option("gamma", "number", 2.0, low=0.0)
    registered(OBJECTIVES, "dm_gamma", Objective("dm_gamma", fit, frozenset({"dm_samples"}), "test", params=(gamma,)))
    space = copy.deepcopy(TINY_SPACE)
    space["stitching"].update(objectives=["dm", "dm_gamma"], stitch_points=["layer2.0"])
    space["evaluation"]["n_eval_robust"] = 0
    default = parse_space(space)
    dm, plain = sorted(default.trials, key=lambda t: t.objective)
    assert plain.params == (("gamma", 2.0),) and dm.params == ()
    set_to = parse_space(dict(space, stitching=dict(space["stitching"], gamma=3.0)))
    dm3, gamma3 = sorted(set_to.trials, key=lambda t: t.objective)
    assert dm3.trial_id == dm.trial_id and gamma3.trial_id != plain.trial_id and gamma3.params == (("gamma", 3.0),)
    explicit = parse_space(dict(space, stitching=dict(space["stitching"], gamma=2.0)))
    assert {t.trial_id for t in explicit.trials} == {t.trial_id for t in default.trials}
    with pytest.raises(SpecError, match=r"^stitching.gamma: expected a number >= 0"):
        parse_space(dict(space, stitching=dict(space["stitching"], gamma=-1.0)))
    with pytest.raises(SpecError, match=r"^stitching.gamma: .*applies to objectives \['dm_gamma'\]"):
        parse_space(dict(space, stitching=dict(space["stitching"], objectives=["dm"], gamma=3.0)))

    sweep_dir = SweepDir(tmp_path, set_to.name)
    sweep_dir.create()
    run_donor(set_to.donors["plain_a"], set_to.donor_evals["plain_a"], sweep_dir, torch.device("cpu"))
    assert run_trial(gamma3, sweep_dir)["status"] == "done"
    curves = analysis.load_curves(sweep_dir.path)
    assert curves[curves["metric"] == "gamma_seen"]["value"].tolist() == [3.0]
    trials = analysis.load_trials(sweep_dir.path)
    assert trials["params"].tolist() == ['{"gamma": 3.0}']
