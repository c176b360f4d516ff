"""Extending the engine the way a user's own module would: an index, an objective and a kind of work registered
in-process (through the registries alone, in a fixture) are validated, hashed into the ids, planned (memory and
cost estimates), computed, written with the columns they declare, read and reported, without an edit to any
other file."""

import copy
import math
import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

import analysis
from analysis.matrices import available_measures
from analysis.report.write import write_report
from analysis.stats import rank_correlations
from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.data.core import make_splits
from sweep.kinds.donor.run import run_donor
from sweep.kinds.reptest.run import run_reptest
from sweep.kinds.trial.run import run_trial
from sweep.measures.indices import Index
from sweep.models.base import split
from sweep.registry import INDICES, OBJECTIVES
from sweep.stitching.objectives import Objective, direct_match
from sweep.store.catalogue import INDEX_CATALOGUE, IndexEntry
from sweep.store.results import SweepDir
from sweep.store.schema import schema, trial_schema
from sweep.worker.zoo import load_donor
from tests.conftest import TINY_SPACE


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
    assert "d_dummy" in schema("reptests").names


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
def _echo_count():
    from sweep.config.fields import Option

    return Option("count", "integer", low=1, doc="how many units")


def _echo_parse(raw, ctx):
    from sweep.config.fields import Section

    return tuple(range(Section(raw, "echo", {"count"}).read(_echo_count())))


def _echo_parts(sweep_dir, unit):
    return [sweep_dir.path / "echo" / f"echo-{unit}.parquet"]


ECHO_SCHEMA = pa.schema(
    [
        ("unit", pa.int64()),
        ("status", pa.string()),
        ("error", pa.string()),
        pa.field("value", pa.int64(), metadata={"description": "the unit's number, doubled"}),
    ]
)


def _echo_run(unit, ctx):
    from sweep.store.results import write_rows

    (part,) = _echo_parts(ctx.sweep_dir, unit)
    if unit == 2 and not (ctx.sweep_dir.path / "echo-fixed").exists():
        row = {"unit": unit, "status": "failed", "error": "RuntimeError: echo 2 fails until fixed", "value": None}
    else:
        row = {"unit": unit, "status": "done", "error": None, "value": 2 * unit}
    write_rows(part, [row], ECHO_SCHEMA)
    return row


def _echo_need(unit, sweep):
    """Its memory need: a MiB per count (`plan` prints the largest; `memory_per_trial` bounds it)."""
    from sweep.costs.memory import Need

    count = len(sweep.units["echo"])
    return Need("echo", f"echo {unit}", "count", count, lambda n: n * 2**20, "echo", "or echo less")


def _echo_sections():
    """Its report section: each done unit's value, as a bar chart and a CSV."""
    import altair as alt

    from analysis.report.sections import ChartSection

    def rows(data):
        echo = data.table("echo")
        return echo[echo["status"] == "done"] if len(echo) else echo

    chart = lambda df: alt.Chart(df).mark_bar().encode(x="unit:O", y="value:Q")  # noqa: E731
    return [ChartSection("Echo: each unit's value, doubled", rows, chart, "echo.png", csv="echo.csv")]


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
            options={"count": _echo_count()},  # the JSON Schema's entry for its section
            schema=ECHO_SCHEMA,
            key="unit",
            timing=None,
            memory=_echo_need,
            price=lambda unit, pricer: pricer.unit_s * (1 + unit),  # a unit's fixed cost, once more per number
            report=_echo_sections,
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

    from sweep.backends.ray import run_stages
    from sweep.planning import planning
    from sweep.planning.status import print_status

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


def test_a_registered_kind_is_in_the_json_schema_the_estimate_the_reader_and_the_report(
    tmp_path, echo_kind, write_space, capsys
):
    """The kind's declaration alone gives it a JSON Schema entry (a bad value refused), `plan`'s memory line,
    a priced `plan --estimate` line, its table's folder, reader (its rows, a foreign part refused naming its
    key column) and its report section, drawn from its rows."""
    import dataclasses

    import jsonschema

    from sweep.cli import main
    from sweep.config.schema import space_schema
    from sweep.planning import estimate
    from sweep.registry import KINDS

    space = dict(copy.deepcopy(TINY_SPACE), echo={"count": 3})
    validator = jsonschema.Draft202012Validator(space_schema())
    assert validator.is_valid(space) and not validator.is_valid(dict(space, echo={"count": 0}))

    path = write_space(space)
    assert main(["plan", str(path), "--estimate"]) == 0
    out = capsys.readouterr().out
    assert "memory: the largest echo unit's measures need 0.0 GiB (echo on count = 3: echo 0)" in out
    assert "  3 echo units: " in out and "not priced" not in out  # every kind of this space is priced
    sweep, profile = parse_space(space), estimate.load_profile(None)
    est = estimate.estimate(sweep, {"echo": ["echo-0", "echo-1", "echo-2"]}, profile)
    assert est.seconds["echo"] == pytest.approx((1 + 2 + 3) * profile["unit_s"]) and not est.uncalibrated
    KINDS.remove("echo")  # the same kind without a price: said, not counted as free
    KINDS.add("echo", dataclasses.replace(echo_kind, price=None))
    unpriced = estimate.estimate(sweep, {"echo": ["echo-0"]}, profile)
    assert unpriced.uncalibrated == {"echo units (the kind declares no price)"}
    KINDS.remove("echo")
    KINDS.add("echo", echo_kind)

    from sweep.api.running import prepare as _prepare

    sweep_dir = SweepDir(tmp_path, sweep.name)
    _prepare(sweep_dir, sweep)  # what run does: the folders of the kinds with units
    assert (sweep_dir.path / "echo").is_dir()  # its table's folder, beside the shipped kinds'
    assert schema("echo").field("value").metadata[b"description"] == b"the unit's number, doubled"
    for unit in sweep.units["echo"]:
        _echo_run(unit, SimpleNamespace(sweep_dir=sweep_dir))
    echo = analysis.load(sweep_dir.path)["echo"].set_index("unit")
    assert echo.loc[[0, 1], "value"].tolist() == [0, 2] and echo.loc[2, "status"] == "failed"

    write_report(sweep_dir.path, tmp_path / "report")
    drawn = pd.read_csv(tmp_path / "report" / "echo.csv")
    assert drawn["unit"].tolist() == [0, 1] and drawn["value"].tolist() == [0, 2]  # the done units
    assert (tmp_path / "report" / "echo.png").stat().st_size > 0
    assert "Echo: each unit" in (tmp_path / "report" / "index.html").read_text()
    assert "echo" in analysis.figures()

    pq.write_table(pa.table({"x": [1]}), sweep_dir.path / "echo" / "foreign.parquet")
    problems = analysis.load(sweep_dir.path)["problems"]
    assert problems["error"].str.contains("no 'unit' column").tolist() == [True]


def test_a_registered_index_is_sized_and_priced_before_it_runs(dummy, registered):
    """An index registered without a model of its own is in the memory and cost estimates with the generic
    model of its kind (not left out); one that declares its `memory` and `work` is charged those, and a space
    it does not fit is refused naming it."""
    from sweep.config.shapes import activation_shape
    from sweep.costs.memory import ALLOCATOR, ShapePair
    from sweep.costs.work import Work, pair_work
    from sweep.kinds.trial.cost import need as trial_need
    from sweep.planning import memory
    from sweep.planning.estimate import estimate, load_profile

    space = copy.deepcopy(TINY_SPACE)
    space["stitching"].update(indices=["dummy"], stitch_points=["layer3.1"], objectives=["dm"])
    space["evaluation"]["n_eval_robust"] = 0
    sweep = parse_space(space)
    (trial,) = sweep.trials
    need = trial_need(trial, sweep)
    assert need is not None and need.largest == "dummy" and [x.bytes for x in memory.needs(sweep)] == [need.bytes]
    n, p = trial.similarity_samples, math.prod(activation_shape("resnet_tiny", "digits", "layer3.1"))
    # the generic model, by hand: both sides held (float32), two float64 copies of each, the p x p products
    workspace = 8 * (2 * n * (p + p) + 2 * (p * p + p * p))
    assert need.bytes == 4 * n * 2 * p + int(ALLOCATOR * workspace)
    pair = ShapePair((p,), (p,), {})
    assert pair_work(pair, ["dummy"], n, 0) == Work(calls=1, mac=n * 3 * p * p, elem=4 * n * 2 * p)

    profile = load_profile(None)
    with_cka = parse_space(dict(space, stitching=dict(space["stitching"], indices=["cka", "dummy"])))
    only_cka = parse_space(dict(space, stitching=dict(space["stitching"], indices=["cka"])))
    seconds = [estimate(s, {"trial": [s.trials[0].trial_id]}, profile).seconds["trial"] for s in (with_cka, only_cka)]
    dummy_s = pair_work(pair, ["dummy"], n, 0).seconds(profile["algebra"])
    assert seconds[0] - seconds[1] == pytest.approx(dummy_s, rel=1e-6) and dummy_s > 0

    entry = IndexEntry("heavy", ("sim_heavy",), "heavy", "similarity")
    registered(INDEX_CATALOGUE, "heavy", entry)
    heavy = Index(entry, _first_minus_last, "flatten", memory=lambda *a: 3 * 2**30, work=lambda *a: Work(mac=1e12))
    registered(INDICES, "heavy", heavy)
    heavy_space = dict(space, stitching=dict(space["stitching"], indices=["dummy", "heavy"]))
    need = trial_need(parse_space(heavy_space).trials[0], parse_space(heavy_space))
    assert need.largest == "heavy" and need.bytes == 4 * n * 2 * p + 3 * 2**30
    assert pair_work(pair, ["heavy"], n, 0) == Work(mac=1e12)
    with pytest.raises(SpecError, match=r"^resources.memory_per_trial: .*or drop heavy"):  # what plan/run check
        memory.check(parse_space(dict(heavy_space, resources={"memory_per_trial": 1})))


def test_each_shipped_kind_is_a_package_laid_out_as_the_recipe_says():
    """docs/development.md's recipe: each shipped kind is its own package `sweep/kinds/<name>/` (`__init__.py`
    registering its entry, `spec.py` its section (a donor's units are found, not parsed: `units.py`),
    `table.py`, `cost.py`, `run.py`), its `run` and its cost hooks named inside its package, its report
    sections the module `analysis/report/kinds/<name>.py`; `SHIPPED` is the order they are registered."""
    import importlib

    from sweep.kinds import SHIPPED
    from sweep.registry import KINDS, resolve
    from tests.conftest import REPO

    assert list(KINDS)[: len(SHIPPED)] == list(SHIPPED)
    for name in SHIPPED:
        kind, folder = KINDS[name], REPO / "sweep" / "kinds" / name
        wanted = {"__init__.py", "units.py" if name == "donor" else "spec.py", "table.py", "cost.py", "run.py"}
        assert wanted <= {p.name for p in folder.glob("*.py")}, f"{name}: {wanted} in {folder}"
        assert importlib.import_module(f"sweep.kinds.{name}").KIND is kind, name
        assert isinstance(kind.run, str) and kind.run.startswith(f"sweep.kinds.{name}.run:"), (name, kind.run)
        assert callable(resolve(kind.run)), name
        for hook in (kind.memory, kind.price, kind.disk):
            assert hook is None or hook.startswith(f"sweep.kinds.{name}.cost:") and callable(resolve(hook)), hook
        assert kind.report == f"analysis.report.kinds.{name}:sections", (name, kind.report)
        assert (REPO / "analysis" / "report" / "kinds" / f"{name}.py").is_file(), name


@pytest.mark.ray
@pytest.mark.slow
def test_a_kind_and_an_index_written_as_the_plugins_page_shows_plan_run_and_report(tmp_path, kind_plugin):
    """docs/plugins.md's kind of work (a package folder laid out as a shipped kind: `echo/__init__.py`,
    `spec.py`, `table.py`, `cost.py`, `run.py`, `report.py`) and index (`my_index.py`, laid out as a shipped
    index), written as the page shows them beside its space: `plan`, `run` (under Ray: the workers import the
    shipped folder and file), `status` and `report`, each a `stitchsweep` command, take them with no other
    edit. The kind's table, the index's column, the status line and the report's section are what the page
    says; `status` and `report` import the sweep's copies (the originals are gone by then)."""
    import os
    import shutil
    import subprocess

    import yaml

    from tests.conftest import REPO

    src, results, report = kind_plugin(tmp_path / "src"), tmp_path / "results", tmp_path / "report"
    page = " ".join((REPO / "docs" / "plugins.md").read_text().split())
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def cli(*args: str) -> str:
        out = subprocess.run([sys.executable, "-m", "sweep", *args], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=600)  # fmt: skip
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    plan = cli("plan", str(src / "space.yaml"), "--estimate")
    assert "sweep echo_study: 1 donors, 1 trials, 3 echo units" in plan, plan
    assert "  3 echo units: " in plan and "echo units (the kind declares no price)" not in plan, plan  # priced
    run = cli("run", str(src / "space.yaml"), "--storage", str(results), "--num-cpus", "2")
    assert "] 3 echo units ran" in run and "] 1 trial units ran" in run, run
    sweep_dir = results / "echo_study"
    kept = sorted(p.relative_to(sweep_dir / "plugins").as_posix() for p in (sweep_dir / "plugins").rglob("*.py"))
    assert kept == [f"echo/{f}.py" for f in ("__init__", "cost", "report", "run", "spec", "table")] + ["my_index.py"]
    assert yaml.safe_load((sweep_dir / "space.yaml").read_text())["plugins"] == ["plugins/echo/", "plugins/my_index.py"]

    shutil.rmtree(src / "echo")  # status and report import the sweep's copies
    (src / "my_index.py").unlink()
    line = "3 echo units: 3 done, 0 failed, 0 pending"
    assert line in cli("status", str(sweep_dir)) and line in page
    cli("report", str(sweep_dir), "--out", str(report))
    drawn = pd.read_csv(report / "echo.csv").sort_values("number")
    assert drawn["number"].tolist() == [0, 1, 2] and drawn["value"].tolist() == [0, 2, 4]  # i x factor 2
    assert (report / "echo.png").stat().st_size > 0
    assert "Echo: each unit" in (report / "index.html").read_text()  # its section, after the shared ones

    echo = pq.read_table(sweep_dir / "echo").to_pandas().sort_values("number")
    assert echo["status"].eq("done").all() and echo["value"].tolist() == [0, 2, 4]
    assert echo["dataset"].eq("fashion_mnist").all() and echo["unit_id"].nunique() == 3
    trials = analysis.load_trials(sweep_dir)  # keeps the plugin index's column without importing it
    assert trials["sim_norm_corr"].tolist() == [pytest.approx(1.0, abs=1e-6)]  # a donor stitched to itself
    assert trials["sim_cka"].tolist() == [pytest.approx(1.0, abs=1e-6)]


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


def _row_norm_cosine(a, b) -> float:
    """A stand-in whole-matrix measure in numpy: the cosine between the two sides' per-image norms."""
    na, nb = (np.linalg.norm(np.asarray(m, dtype=np.float64), axis=1) for m in (a, b))
    return float(na @ nb / (np.linalg.norm(na) * np.linalg.norm(nb)))


@pytest.fixture
def norm_cosine(registered):
    """The index `norm_cosine` of scope "similarity" only (a numpy pairwise function), and `norm_heavy`, the
    same with a memory model of its own, registered for one test."""
    entries = [
        IndexEntry(name, (name,), name, "similarity", scopes=("similarity",)) for name in ("norm_cosine", "norm_heavy")
    ]
    for entry, memory in zip(entries, (None, lambda *a: 3 * 2**30)):
        registered(INDEX_CATALOGUE, entry.index, entry)
        registered(INDICES, entry.index, Index(entry, _row_norm_cosine, "flatten", memory=memory))
    return entries[0]


def _similarity_space(measure: str, **extra) -> dict:
    space = copy.deepcopy(TINY_SPACE)
    del space["stitching"]
    space["donors"]["plain_b"] = dict(space["donors"]["plain_a"], seed=1)
    pairs = [{"a": "zoo:plain_a", "b": "zoo:plain_b"}]
    space["similarity"] = dict(measure=measure, images=40, points=["layer1.1", "layer3.1"], pairs=pairs, **extra)
    return space


def test_a_similarity_index_is_a_measure_of_similarity_entries_only(norm_cosine):
    """An index of scope "similarity" with a numpy pairwise function: a `similarity:` entry's `measure` accepts it
    (the JSON Schema lists it), its unit is sized with the generic model and priced, the kind's measure function
    computes it on every pair of held matrices and the similarity table has its column; the trials and reptests
    tables do not, and `stitching.indices` refuses it."""
    from sweep.config.schema import space_schema
    from sweep.config.shapes import activation_shape
    from sweep.costs.memory import ALLOCATOR
    from sweep.kinds.similarity.cost import need as similarity_need
    from sweep.kinds.similarity.run import measure_fn, pairwise
    from sweep.planning.estimate import estimate, load_profile

    sweep = parse_space(_similarity_space("norm_cosine"))
    (unit,) = sweep.units["similarity"]
    assert unit.measure == "norm_cosine" and unit.estimator is None and "(norm_cosine)" in unit.label
    with pytest.raises(SpecError, match=r"^similarity.measure: .*found 'norm_cosin' \(did you mean 'norm_cosine'"):
        parse_space(_similarity_space("norm_cosin"))
    with pytest.raises(SpecError, match=r"^similarity.svcca_max_k: expected null \(it applies to measure: svcca\)"):
        parse_space(_similarity_space("norm_cosine", svcca_max_k=2))
    with pytest.raises(SpecError, match=r"^stitching.indices\[0\]: expected one of .*found 'norm_cosine'"):
        parse_space(dict(TINY_SPACE, stitching=dict(TINY_SPACE["stitching"], indices=["norm_cosine"])))
    measure = space_schema()["properties"]["similarity"]["anyOf"][0]["properties"]["measure"]
    assert "norm_cosine" in measure["enum"] and "rank" not in measure["enum"]

    # sized: the generic model on the widest pair (two float64 copies of each side, the p x p products, by hand)
    need = similarity_need(unit)
    assert need is not None and need.largest == "norm_cosine"
    heavy = similarity_need(parse_space(_similarity_space("norm_heavy")).units["similarity"][0])
    pa = pb = max(math.prod(activation_shape("resnet_tiny", "digits", p)) for p in unit.a_points)
    generic = int(ALLOCATOR * 8 * (2 * 40 * (pa + pb) + 2 * (pa * pb + max(pa, pb) ** 2)))
    assert heavy.bytes - need.bytes == 3 * 2**30 - generic
    # priced: its images through both donors, as OPD's units are
    profile = load_profile(None)
    opd = parse_space(_similarity_space("opd")).units["similarity"][0]
    seconds = [estimate(s, {"similarity": [s.units["similarity"][0].unit_id]}, profile).seconds["similarity"]
               for s in (sweep, parse_space(_similarity_space("opd")))]  # fmt: skip
    assert seconds[0] == pytest.approx(seconds[1]) and seconds[0] > 0 and opd.unit_id != unit.unit_id

    # computed: every pair of held (images x features) matrices, each against the numpy function
    gen = torch.Generator().manual_seed(0)
    held_a = [torch.randn(40, 12, generator=gen), torch.randn(40, 30, generator=gen)]
    held_b = [torch.randn(40, 7, generator=gen)]
    values, times, extra = pairwise(measure_fn(unit), held_a, held_b)
    for i, a in enumerate(held_a):
        na, nb = a.double().norm(dim=1), held_b[0].double().norm(dim=1)
        assert values[i, 0].item() == pytest.approx(float(na @ nb / (na.norm() * nb.norm())), rel=1e-9)
    assert values.shape == (2, 1) and (times >= 0).all() and extra == {(0, 0): {}, (1, 0): {}}

    assert schema("similarity").field("norm_cosine").type == "double"
    assert "norm_cosine" not in trial_schema().names + schema("reptests").names
    assert not any("norm_cosine" in c for c in trial_schema().names + schema("reptests").names)


@pytest.mark.slow
def test_a_similarity_index_unit_runs_and_is_read_back(tmp_path, norm_cosine):
    """A unit of the plugin index runs in-process: one row per pair of points, its value in its own column of
    the similarity table (written and read back), each pair timed, against the numpy function on the held
    activations; the shipped measures' columns stay empty."""
    from sweep.kinds.base import RunContext
    from sweep.kinds.similarity.run import run_similarity
    from sweep.models.features import features

    sweep = parse_space(_similarity_space("norm_cosine"))
    (unit,) = sweep.units["similarity"]
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    for name in ("plain_a", "plain_b"):
        row = run_donor(sweep.donors[name], sweep.donor_evals[name], sweep_dir, torch.device("cpu"))
        assert row["status"] == "done", row.get("error")
    assert run_similarity(unit, RunContext(sweep_dir, torch.device("cpu")))["status"] == "done"
    rows = analysis.load_similarity(sweep_dir.path)
    assert len(rows) == 4 and rows["measure"].eq("norm_cosine").all() and (rows["time_measure_s"] > 0).all()
    assert rows["cka"].isna().all() and rows["opd"].isna().all()
    a, b = (load_donor(sweep_dir, key, torch.device("cpu")) for key in (unit.a_key, unit.b_key))
    data = sweep.donors["plain_a"].data
    x = make_splits(data.dataset, data.train_size, data.val_size, data.test_size).test_x[: unit.images]
    with torch.no_grad():
        fa, fb = (features(m, unit.a_points)(x) for m in (a, b))
    for row in rows.itertuples():
        want = _row_norm_cosine(fa[row.a_index - 1].flatten(1), fb[row.b_index - 1].flatten(1))
        assert row.norm_cosine == pytest.approx(want, rel=1e-6)


def test_the_plugin_facing_import_paths_of_the_previous_release_keep_working():
    """A plugin written against the release before the kinds became packages imports these names from these
    paths, and each is the name `sweep` exports where it exports one."""
    import importlib

    import sweep

    paths = {
        "sweep.models.base": ["register_architecture", "StagedNet", "Normalize"],
        "sweep.measures.indices": ["register_index", "Pair"],
        "sweep.store.catalogue": ["IndexEntry"],
        "sweep.kinds.base": ["Kind", "register_kind", "RunContext", "record_unit"],
        "sweep.stitching.objectives": ["register_objective", "direct_match"],
        "sweep.config.fields": ["Option"],
    }
    for module, names in paths.items():
        mod = importlib.import_module(module)
        for name in names:
            value = getattr(mod, name)
            assert getattr(sweep, name, value) is value, f"sweep.{name} is not {module}.{name}"
