"""Similarity without stitching (Cianfarani et al. 2022): the `similarity` section, its units run in-process
(no Ray), and what CKA matrices promise: a network compared with itself gives 1 on the diagonal at every point
and a symmetric matrix; adversarial inputs are recorded with the accuracy each side had on them."""

import copy

import numpy as np
import pytest
import torch

import analysis
from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.data.core import load_pool, make_splits
from sweep.kinds.base import RunContext
from sweep.kinds.donor.run import run_donor, save_donor
from sweep.kinds.similarity.run import run_similarity
from sweep.measures.similarity import MinibatchCKA, minibatches
from sweep.models.base import build
from sweep.models.features import features
from sweep.store.results import SweepDir
from sweep.worker import cache
from sweep.worker.zoo import load_donor
from tests.conftest import TINY_SPACE
from tests.sweep.measures.test_similarity import _svcca_reference


def _space(entries) -> dict:
    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["plain_b"] = dict(space["donors"]["plain_a"], seed=1)
    del space["stitching"]
    space["evaluation"]["n_eval_robust"] = 0
    space["similarity"] = entries
    return space


WITHIN = {"pairs": [{"a": "zoo:plain_a", "b": "zoo:plain_a"}], "images": 120, "batch_size": 50, "passes": 2}


def test_units_expand_per_pair_and_points_are_validated():
    sweep = parse_space(
        _space(
            [dict(WITHIN, pairs=[{"a": "zoo:plain_a", "b": "zoo:plain_a"}, {"a": "zoo:plain_a", "b": "zoo:plain_b"}])]
        )
    )
    (within, across) = sweep.units["similarity"]
    assert (
        within.a_points == within.b_points == ("layer1.0", "layer1.1", "layer2.0", "layer2.1", "layer3.0", "layer3.1")
    )
    assert within.unit_id != across.unit_id and set(sweep.donors) == {"plain_a", "plain_b"}
    modules = parse_space(_space([dict(WITHIN, points="modules")])).units["similarity"][0]
    assert len(modules.a_points) > 30 and "stages.layer1_0.relu" in modules.a_points
    with pytest.raises(
        SpecError,
        match=r"^similarity\[0\]\.points\[1\]: expected a graph node .*found .stages.layer1_0.rellu. \(did you mean",
    ):
        parse_space(_space([dict(WITHIN, points=["stages.layer1_0.relu", "stages.layer1_0.rellu"])]))
    with pytest.raises(SpecError, match=r"^similarity\[0\]\.attack: expected an option of pairs with adversarial"):
        parse_space(_space([dict(WITHIN, attack={"eps": 0.1})]))
    with pytest.raises(SpecError, match=r"^similarity\[0\]\.pairs\[0\]\.b_inputs: expected one of"):
        parse_space(_space([dict(WITHIN, pairs=[{"a": "zoo:plain_a", "b": "zoo:plain_a", "b_inputs": "adv"}])]))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    space = _space([dict(WITHIN, pairs=[{"a": "zoo:plain_a", "b": "zoo:plain_b"}])])
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path_factory.mktemp("results"), sweep.name)
    sweep_dir.create()
    for name in ("plain_a", "plain_b"):
        row = run_donor(sweep.donors[name], sweep.donor_evals[name], sweep_dir, torch.device("cpu"))
        assert row["status"] == "done", row.get("error")
    return space, sweep_dir


def _run(space: dict, sweep_dir: SweepDir, entry: dict):
    sweep = parse_space(dict(space, similarity=[entry]))
    (unit,) = sweep.units["similarity"]
    out = run_similarity(unit, RunContext(sweep_dir, torch.device("cpu")))
    assert out["status"] == "done", out.get("error")
    rows = analysis.load_similarity(sweep_dir.path)
    return unit, rows[rows["unit_id"] == unit.unit_id]


def test_a_unit_holds_its_test_images_and_the_worker_s_donors_and_nothing_more(tmp_path, monkeypatch):
    """A worker running a similarity unit keeps the unit's test images (a copy of their own, not a view of the
    dataset) and the cached donors, which the unit reads without copying: not the split's training part, nor
    the dataset kept per process (on CIFAR-10 with two WRN-28-10s, 1.7 GB of the worker's peak)."""
    space = _space([dict(WITHIN, pairs=[{"a": "zoo:plain_a", "b": "zoo:plain_b"}], images=40, passes=1)])
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path / "results", sweep.name)
    sweep_dir.create()
    splits = make_splits("digits", None, 200, None)
    for name in ("plain_a", "plain_b"):  # freshly initialised donors: what is held does not depend on training
        donor = sweep.donors[name]
        model = build(donor.arch, splits.in_channels, splits.num_classes, splits.mean, splits.std, splits.image_size)
        save_donor(sweep_dir.checkpoint(donor.donor_key), model, donor, splits, splits.mean, splits.std)
    held = cache.configure({cache.DIR_ENV: ""})  # memory only, empty
    held.clear()
    load_pool.cache_clear()
    copies, deepcopy = [], copy.deepcopy

    def spy(x, *memo):
        copies.extend([type(x).__name__] if isinstance(x, torch.nn.Module) else [])
        return deepcopy(x, *memo)

    monkeypatch.setattr(copy, "deepcopy", spy)
    try:
        (unit,) = sweep.units["similarity"]
        out = run_similarity(unit, RunContext(sweep_dir, torch.device("cpu")))
        assert out["status"] == "done", out.get("error")
        entries = dict(held._entries)
    finally:
        monkeypatch.undo()
        cache.configure()
    assert sorted(key[0] for key in entries) == ["donor", "donor", "test_images"]
    assert load_pool.cache_info().currsize == 0
    assert not copies, copies  # no module copied
    (x, y), _ = next(v for k, v in entries.items() if k[0] == "test_images")
    assert x.untyped_storage().nbytes() == x.nbytes and torch.equal(x, splits.test_x[: unit.images])
    assert torch.equal(y, splits.test_y[: unit.images])


@pytest.mark.slow
@pytest.mark.parametrize("estimator", ["minibatch", "full"])
def test_a_network_with_itself_is_one_on_the_diagonal_and_symmetric(trained, estimator):
    space, sweep_dir = trained
    points = ["stages.layer1_0.conv1", "stages.layer1_0.bn1", "stages.layer2_0.relu", "stages.head.flatten"]
    unit, rows = _run(space, sweep_dir, dict(WITHIN, points=points, estimator=estimator))
    matrix = rows.pivot(index="a_index", columns="b_index", values="cka").to_numpy()
    assert matrix.shape == (4, 4)
    assert np.allclose(np.diag(matrix), 1.0, atol=1e-9)
    assert np.allclose(matrix, matrix.T, atol=1e-9)
    assert (matrix < 1.0 - 1e-6)[~np.eye(4, dtype=bool)].all()  # distinct layers are not identical
    # one network: its accuracy is measured once and recorded on both sides (exact)
    assert set(rows["estimator"]) == {estimator} and (rows["a_acc"] == rows["b_acc"]).all()


@pytest.mark.slow
def test_every_node_read_as_it_runs_gives_the_cka_of_every_activation_held(trained):
    """`points: modules` across two networks: each node's Gram is taken as the node runs and its activation
    dropped (bounded memory); the matrix is the one of holding every node's activations of a batch at once."""
    space, sweep_dir = trained
    entry = dict(WITHIN, pairs=[{"a": "zoo:plain_a", "b": "zoo:plain_b"}], points="modules", images=60, passes=1)
    unit, rows = _run(space, sweep_dir, entry)
    a, b = (load_donor(sweep_dir, key, torch.device("cpu")) for key in (unit.a_key, unit.b_key))
    donor = parse_space(space).donors["plain_a"]
    x = make_splits(donor.data.dataset, donor.data.train_size, donor.data.val_size, donor.data.test_size).test_x
    x = x[: unit.images]
    acc = MinibatchCKA()
    for _, idx in minibatches(len(x), unit.batch_size, unit.passes, unit.seed):
        with torch.no_grad():
            acc.update(features(a, unit.a_points)(x[idx]), features(b, unit.b_points)(x[idx]))
    held = acc.value().numpy()
    matrix = rows.pivot(index="a_index", columns="b_index", values="cka").sort_index().sort_index(axis=1).to_numpy()
    assert matrix.shape == held.shape == (len(unit.a_points), len(unit.b_points))
    # the same float64 Grams of the same activations: agreement to rounding
    assert np.allclose(matrix, held, atol=1e-9)


@pytest.mark.slow
def test_benign_against_adversarial_representations(trained):
    """A network's benign vs its adversarial representations (Cianfarani et al. Fig. 4): the examples are
    crafted against it, so its accuracy on them falls; the first layer's representations stay close while the
    last one's move."""
    space, sweep_dir = trained
    entry = dict(
        WITHIN,
        pairs=[{"a": "zoo:plain_a", "b": "zoo:plain_a", "b_inputs": "adversarial"}],
        points="stitch",
        attack={"eps": 0.3, "steps": 5},
    )
    unit, rows = _run(space, sweep_dir, entry)
    assert unit.attack_step_size == pytest.approx(2.5 * 0.3 / 5) and unit.attack_source == "zoo:plain_a"
    diagonal = rows[rows["a_index"] == rows["b_index"]].sort_values("a_index")["cka"].to_numpy()
    assert diagonal[0] > diagonal[-1] and (diagonal < 1.0).all()
    first = rows.iloc[0]
    assert first["b_acc"] < first["a_acc"] - 0.2 and first["attack_norm"] == "linf"


@pytest.mark.slow
def test_the_report_draws_the_cka_matrices_curves_and_transfer_table(trained, tmp_path):
    """Units of every shape in one results folder: the report draws every matrix, the diagonal curves, and the
    transfer table (b's accuracy on a's adversarial examples)."""
    from analysis.report.write import write_report

    space, sweep_dir = trained
    _run(space, sweep_dir, dict(WITHIN, points="stitch"))
    across = dict(
        WITHIN,
        pairs=[{"a": "zoo:plain_a", "b": "zoo:plain_b", "a_inputs": "adversarial", "b_inputs": "adversarial"}],
        attack={"eps": 0.2, "steps": 3},
        points="stitch",
    )
    _, rows = _run(space, sweep_dir, across)
    white_box, transfer = rows["a_acc"].iloc[0], rows["b_acc"].iloc[0]
    assert transfer > white_box  # examples crafted against a hurt a more than another network
    index = write_report(sweep_dir.path, tmp_path / "report")
    page = index.read_text()
    assert "CKA without stitching" in page and "benign vs adversarial" in page
    assert (tmp_path / "report" / "cka_matrices.png").stat().st_size > 5_000
    assert "CKA within networks side by side" in page
    assert (tmp_path / "report" / "cka_within_networks.png").stat().st_size > 5_000
    matrices = analysis.load_similarity(sweep_dir.path)
    written = __import__("pandas").read_csv(tmp_path / "report" / "cka_matrices.csv")
    assert len(written) == len(matrices[matrices["status"] == "done"])
    table = __import__("pandas").read_csv(tmp_path / "report" / "transfer_matrix.csv").set_index("attack_source")
    assert table.loc["zoo:plain_a", "zoo:plain_b"] == pytest.approx(transfer)
    assert table.loc["zoo:plain_a", "zoo:plain_a"] == pytest.approx(white_box)  # the white-box diagonal


@pytest.mark.slow
@pytest.mark.parametrize("measure", ["opd", "svcca"])
def test_procrustes_and_svcca_units_measure_each_pair_on_the_held_activations_and_time_it(trained, measure):
    """Cianfarani et al. B.1: the same pairs of points under OPD and SVCCA, each pair timed. The unit's values
    are the measure on every activation of the images, held; a network against itself is 0 (OPD) or 1 (SVCCA)
    on the diagonal. Plumbing only: the values are compared with the same function the unit calls (`measure_fn`;
    the measures themselves are checked against independent formulations in tests/sweep/measures/test_similarity.py)."""
    from sweep.kinds.similarity.run import measure_fn

    space, sweep_dir = trained
    points = ["layer1.1", "layer2.1", "layer3.1"]
    entry = dict(WITHIN, pairs=[{"a": "zoo:plain_a", "b": "zoo:plain_b"}], points=points, measure=measure, images=80)
    unit, rows = _run(space, sweep_dir, entry)
    assert unit.estimator is None and f"({measure}" in unit.label
    assert rows[measure].notna().all() and rows["cka"].isna().all() and (rows["time_measure_s"] > 0).all()
    if measure == "svcca":  # the protocol and the directions each side kept, per pair
        assert unit.svcca_max_k == 4 and (rows["svcca_max_k"] == 4).all()  # 80 images // 20
        assert rows["svcca_k_a"].between(1, 4).all() and rows["svcca_k_b"].between(1, 4).all()
    a, b = (load_donor(sweep_dir, key, torch.device("cpu")) for key in (unit.a_key, unit.b_key))
    donor = parse_space(space).donors["plain_a"]
    x = make_splits(donor.data.dataset, donor.data.train_size, donor.data.val_size, donor.data.test_size).test_x
    with torch.no_grad():
        fa, fb = (features(m, unit.a_points)(x[: unit.images]) for m in (a, b))
    for row in rows.itertuples():
        pa, pb = fa[row.a_index - 1].flatten(1), fb[row.b_index - 1].flatten(1)
        if measure == "svcca":  # against numpy's formulation: the value and both k
            want, k_a, k_b = _svcca_reference(pa.double().numpy(), pb.double().numpy(), max_k=unit.svcca_max_k)
            assert (row.svcca_k_a, row.svcca_k_b) == (k_a, k_b)
        else:
            want = measure_fn(unit)(pa, pb)
        assert getattr(row, measure) == pytest.approx(want, abs=1e-6)
    _, itself = _run(space, sweep_dir, dict(entry, pairs=[{"a": "zoo:plain_a", "b": "zoo:plain_a"}]))
    diagonal = itself[itself["a_index"] == itself["b_index"]][measure]
    assert np.allclose(diagonal, 0.0 if measure == "opd" else 1.0, atol=1e-6)


@pytest.mark.slow
def test_the_report_compares_cka_procrustes_and_svcca_on_the_same_pairs(trained):
    """B.1's table: one row per pair of points with the three measures and their times, from three units on
    the same donors, points and images; a unit measured alone (another image count) is not compared. Each cell
    holds its own measure of its own pair: CKA and OPD against numpy formulations on the held activations
    (CKA from centred Grams; OPD as Ding et al.'s 2 - 2 ||B^T A||_* of centred, Frobenius-normalised
    activations), SVCCA against the unit's function (a swapped column or pair fails)."""
    space, sweep_dir = trained
    base = dict(WITHIN, pairs=[{"a": "zoo:plain_a", "b": "zoo:plain_b"}], points=["layer1.1", "layer3.1"], images=64)
    for extra in ({"estimator": "full"}, {"measure": "opd"}, {"measure": "svcca"}):
        _run(space, sweep_dir, dict(base, **extra))
    _run(space, sweep_dir, dict(base, measure="opd", images=48))
    from analysis.charts.cka import measures_compared

    table = measures_compared(analysis.load_similarity(sweep_dir.path))
    mine = table[table["images"] == 64]
    assert len(mine) == 4 and set(table["images"]) <= {64, 80}  # 2 x 2 pairs; the 48-image unit stands alone
    for m in ("cka", "opd", "svcca"):
        assert mine[m].notna().all() and np.isfinite(mine[f"time_{m}_s"]).all() and (mine[f"time_{m}_s"] > 0).all()
    from sweep.measures.indices.svcca import svcca_columns

    fa, fb = _held(space, sweep_dir, ["layer1.1", "layer3.1"], 64)
    for row in mine.itertuples():
        a, b = fa[row.a_index - 1], fb[row.b_index - 1]
        assert row.cka == pytest.approx(_numpy_cka(a, b), abs=1e-6)
        assert row.opd == pytest.approx(_numpy_opd(a, b), abs=1e-6)
        svcca, _ = svcca_columns(torch.from_numpy(a), torch.from_numpy(b), max_k=64 // 20)  # the default cap
        assert row.svcca == pytest.approx(svcca, abs=1e-6)


def _held(space: dict, sweep_dir: SweepDir, points: list[str], images: int) -> tuple[list, list]:
    """The two donors' activations at `points` on the first `images` test images, flattened per image."""
    donors = parse_space(space).donors
    a, b = (load_donor(sweep_dir, donors[name].donor_key, torch.device("cpu")) for name in ("plain_a", "plain_b"))
    donor = donors["plain_a"]
    x = make_splits(donor.data.dataset, donor.data.train_size, donor.data.val_size, donor.data.test_size).test_x
    with torch.no_grad():
        return tuple([f.flatten(1).double().numpy() for f in features(m, points)(x[:images])] for m in (a, b))


def _centred(x: np.ndarray) -> np.ndarray:
    return x - x.mean(axis=0, keepdims=True)


def _numpy_cka(a: np.ndarray, b: np.ndarray) -> float:
    k, l_ = _centred(a) @ _centred(a).T, _centred(b) @ _centred(b).T
    return float((k * l_).sum() / np.sqrt((k * k).sum() * (l_ * l_).sum()))


def _numpy_opd(a: np.ndarray, b: np.ndarray) -> float:
    a, b = _centred(a) / np.linalg.norm(_centred(a)), _centred(b) / np.linalg.norm(_centred(b))
    return float(2 - 2 * np.linalg.svd(b.T @ a, compute_uv=False).sum())
