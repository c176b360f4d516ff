"""Extending the engine the way a user's own module would: an index and an objective registered in-process
(through the registries alone, in a fixture, no Ray) are validated, hashed into the ids, computed, written
with the columns their catalogue entry declares, and reported, without an edit to any other file."""

import copy

import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

import analysis
from analysis.report import write_report
from analysis.stats import rank_correlations
from analysis.store.catalogue import INDEX_CATALOGUE, IndexEntry
from analysis.store.schema import reptest_schema, trial_schema
from analysis.tables import available_measures
from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.data.core import make_splits
from sweep.kinds.donor import load_donor, run_donor
from sweep.kinds.reptest import run_reptest
from sweep.kinds.stitch import run_trial
from sweep.measures.similarity import Index
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
