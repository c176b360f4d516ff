"""The sweep's report on a study that is not a paper's: two plain donors of one architecture, stitched at every
point by TLM and DM, CKA at each stitch point (`indices: [cka]`) and a CKA matrix; nothing robust, one robustness
level. Results made by hand from the space's plan (`tests/synthetic.py`), with what the study does not measure
blanked as a run leaves it. The report draws each per-point index beside the accuracy at the same points,
overlays the objectives, leaves out the sections whose data does not vary and scales the matrix to the data; a
paper's page keeps the paper's drawing of the same sections."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.report.data import report_data
from analysis.report.notebook import section
from analysis.report.sections import chart_sections
from sweep.store.catalogue import INDEX_CATALOGUE
from tests.synthetic import synthetic_results

STUDY = """
name: own_study
data: {dataset: fashion_mnist, train_size: 600, val_size: 100, test_size: 200}
donors:
  net:
    vary: {seed: [0, 1]}
    name: "net_s{seed}"
    donor: {arch: resnet_tiny, epochs: 2, lr: 0.1, seed: "{seed}"}
stitching:
  pairs: [{zip: {front: {name: net_s0}, end: {name: net_s1}}}]
  stitch_points: all
  objectives: [tlm, dm]
  seeds: [0, 1]
  epochs: 1
  indices: [cka]
similarity:
  - pairs: [{a: zoo:net_s0, b: zoo:net_s1}]
    points: stitch
evaluation: {n_eval_robust: 0}
"""
# nothing robust, no OOD detection, one index: a run leaves these columns empty
UNMEASURED = ("robust_acc", "front_robust_acc", "end_robust_acc", "receiver_acc", "ood_auroc")


def _blank(path, keep) -> None:
    """Null every column of the Parquet file `path` that `keep` rejects (made-up values of what was not measured)."""
    table = pq.read_table(path)
    for i, name in enumerate(table.column_names):
        if not keep(name):
            table = table.set_column(i, table.field(i), pa.nulls(len(table), table.field(i).type))
    pq.write_table(table, path)


def study_results(root):
    """The study's made-up results: only `sim_cka` among the indices, no robust accuracy."""
    space = root.parent / "own_study.yaml"
    space.write_text(STUDY)
    results = synthetic_results(space, root)
    others = {c for e in INDEX_CATALOGUE.values() for c in e.columns} - {"sim_cka"}
    for part in (results / "trials").glob("*.parquet"):
        _blank(part, lambda c: c not in UNMEASURED and c not in others)
    for part in (results / "donors").glob("*.parquet"):
        _blank(part, lambda c: c not in ("robust_acc", "train_robust_acc"))
    return results


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return report_data(study_results(tmp_path_factory.mktemp("study") / "own_study"))[0]


def _drawn(data) -> dict[str, pd.DataFrame]:
    return {s.name: rows for s in chart_sections() if s.drawn(rows := s.data(data))}


def _marks(spec) -> list[dict]:
    """Every single view of a Vega-Lite spec (layers, concatenations)."""
    if isinstance(spec, dict):
        inner = [m for key in ("layer", "hconcat", "vconcat", "concat") for s in spec.get(key, []) for m in _marks(s)]
        return inner or ([spec] if "mark" in spec else [])
    return []


@pytest.mark.slow  # the study planned and its results made: seconds
def test_sections_whose_data_does_not_vary_are_left_out(data):
    drawn = _drawn(data)
    assert {"stitching", "cka_matrices", "donor_curves"} <= set(drawn)
    # one robustness level: the agreement curves have rows (eps 0 only) but are not drawn
    agreement = section("agreement_curves").data(data)
    assert len(agreement) and agreement["eps"].nunique() == 1
    assert "agreement_curves" not in drawn
    assert not section("agreement_by_level").shown(section("agreement_by_level").data(data))
    # Smith & Marcu's tables of model types: one type is no comparison
    one = pd.DataFrame({"arch": ["resnet_tiny"], "model": ["fashion_mnist"], "acc": [0.9]})
    assert not section("model_accuracy").shown(one)
    assert section("model_accuracy").shown(pd.concat([one, one.assign(model="mnist")]))


@pytest.mark.slow  # the study planned and its results made: seconds
def test_objectives_overlay_in_one_panel_beside_the_index_at_the_same_points(data):
    spec = section("stitching").report_chart(data.same_task).to_dict()
    assert len(spec["vconcat"]) == 1  # one donor pair: one row
    accuracy, index = spec["vconcat"][0]["hconcat"]
    lines = [m for m in _marks(accuracy) if m.get("encoding", {}).get("color", {}).get("field") == "setting"]
    settings = {r["setting"] for m in lines for r in spec["datasets"][m["data"]["name"]]}
    assert settings == {"tlm", "dm"}  # one panel holds both objectives
    assert not any("strokeDash" in m.get("encoding", {}) for m in _marks(accuracy))  # no robust accuracy drawn
    index_marks = _marks(index)
    assert index_marks[0]["encoding"]["color"]["field"] == "index"
    assert "rho" in index["title"] and "cka" in index["title"]
    # the same stitch points, in the same order, on both x axes
    assert accuracy["layer"][-1]["encoding"]["x"]["sort"] == index_marks[0]["encoding"]["x"]["sort"]
    assert len(index_marks[0]["encoding"]["x"]["sort"]) == data.same_task["front_point"].nunique()


@pytest.mark.slow  # the study planned and its results made: seconds
def test_the_rank_correlation_agrees_with_ranks_correlated_by_hand(data):
    from analysis.charts.per_point import correlations

    table = correlations(data.same_task)
    assert set(table["index"]) == {"cka"} and set(table["setting"]) == {"tlm", "dm"}
    t = data.same_task
    cka = t.groupby("point_index")["sim_cka"].mean()  # an index compares the donors: one value per point
    for r in table.itertuples(index=False):
        accuracy = t[t["setting"] == r.setting].groupby("point_index")["clean_acc"].mean()
        assert r.points == len(accuracy) == len(cka)
        # Spearman's rho: Pearson's correlation of the ranks
        assert r.rho == pytest.approx(accuracy.rank().corr(cka.rank()), abs=1e-9)


def test_a_monotone_index_correlates_perfectly():
    from analysis.charts.per_point import correlations

    rows = pd.DataFrame(
        dict(status="done", front="a", end="b", setting="tlm", front_point=list("pqrs"), end_point=list("pqrs"),
             point_index=[1, 2, 3, 4], seed=0, clean_acc=[0.2, 0.5, 0.6, 0.9], front_clean_acc=0.9,
             end_clean_acc=0.9, sim_cka=[0.1, 0.3, 0.35, 0.8])
    )  # fmt: skip
    r = correlations(rows).iloc[0]
    assert r["rho"] == pytest.approx(1.0) and r["tau"] == pytest.approx(1.0) and r["rho_p"] < 0.05


@pytest.mark.slow  # the study planned and its results made: seconds
def test_the_sweeps_matrix_is_scaled_to_the_data_and_the_papers_keeps_zero_to_one(data):
    rows = section("cka_matrices").data(data)
    own = json.dumps(section("cka_matrices").report_chart(rows).to_dict())
    low, high = rows["cka"].min(), rows["cka"].max()
    assert f"this data's {low:.2f}-{high:.2f}" in own
    assert f'"domain": [{low}, {high}]' in own
    assert '"mark": {"type": "text"' in own  # values printed in the cells
    paper = json.dumps(section("cka_matrices").chart(rows).to_dict())
    assert '"domain": [0, 1]' in paper and "this data's" not in paper


@pytest.mark.slow  # the study planned and its results made: seconds
def test_donors_unattacked_show_no_eps_and_tables_are_sorted(data):
    donors = section("donors").data(data)
    assert (donors["n_eval_robust"] == 0).all() and donors["eps"].isna().all()
    assert donors["donor"].tolist() == sorted(donors["donor"])
    from analysis.report.table_sections import table_sections

    trials = [s for s in table_sections() if s.title == "Trials"][0].data(data)  # no CSV name: found by its title
    keys = trials[["front", "end", "point_index"]].apply(tuple, axis=1).tolist()
    assert keys == sorted(keys)


@pytest.mark.slow  # the study planned and its results made: seconds
def test_donor_curves_tick_at_whole_epochs(data):
    spec = section("donor_curves").report_chart(data.donor_curves).to_dict()
    axis = spec["spec"]["encoding"]["x"]["axis"]
    assert axis["values"] == sorted(data.donor_curves["epoch"].unique().tolist()) and axis["format"] == "d"
