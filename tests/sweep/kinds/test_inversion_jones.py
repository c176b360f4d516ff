"""Jones et al. 2022 (If You've Trained One You've Trained Them All, UAI) and Balogh & Jelasity 2023 Section 6:
the penultimate point of every architecture, least-squares stitching there, representation inversion (both
recipes), CKA on inverted data and saliency similarity, each against an independent formulation or a property
a bug would break."""

import copy

import numpy as np
import pytest
import torch

import analysis
from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.kinds.base import RunContext
from sweep.kinds.donor.run import run_donor
from sweep.kinds.inversion.run import read_inverted, run_inversion
from sweep.kinds.similarity.run import run_similarity
from sweep.kinds.trial.run import run_trial
from sweep.measures.indices.saliency import saliency_cosines
from sweep.measures.inversion import invert, relative_error
from sweep.models.base import ARCHITECTURES, build, split
from sweep.store import inverted as stored
from sweep.store.results import SweepDir
from sweep.worker.splits import worker_splits
from sweep.worker.zoo import load_donor
from tests.conftest import TINY_SPACE
from tests.ties import assert_reproduces, count, end_logits, near_ties

CPU = torch.device("cpu")


@pytest.mark.parametrize("arch", sorted(set(ARCHITECTURES) - {"tv_wide_resnet50_2", "tv_wide_resnet50_4"}))
def test_every_architecture_has_a_penultimate_point_the_classifier_reads(arch):  # (the wide ones: as tv_resnet50)
    """`penultimate` is the vector the last linear layer reads: cutting there changes nothing, the classifier
    applied to it gives the logits, and the state dict keeps its keys (checkpoints still load)."""
    entry = ARCHITECTURES[arch]
    assert "penultimate" in entry.points() and "penultimate" not in entry.stitch_points()  # not in `all`
    torch.manual_seed(0)
    model = build(arch, 3, 7, (0.5,), (0.5,), 32).eval()
    x = torch.rand(2, 3, 32, 32)
    front, end = split(model, "penultimate")
    with torch.no_grad():
        v, logits = front(x), model(x)
    assert v.shape == (2, *entry.activation_shapes(3, 32, 7)["penultimate"]) and v.dim() == 2
    linear = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m.out_features == 7][-1]
    torch.testing.assert_close(linear(v), logits)
    torch.testing.assert_close(end(v), logits)
    assert not any("penultimate" in k for k in model.state_dict())


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """Two tiny donors on the digits, trained once for this module."""
    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["plain_b"] = dict(space["donors"]["plain_a"], seed=1)
    sweep = parse_space(dict(space, similarity={"pairs": [{"a": "zoo:plain_a", "b": "zoo:plain_b"}]}))
    sweep_dir = SweepDir(tmp_path_factory.mktemp("results"), sweep.name)
    sweep_dir.create()
    for name in ("plain_a", "plain_b"):
        row = run_donor(sweep.donors[name], sweep.donor_evals[name], sweep_dir, CPU)
        assert row["status"] == "done" and row["clean_acc"] > 0.5, row
    return space, sweep_dir


def _test_images(spec) -> torch.Tensor:
    """The test images of a unit's data, which its stored indices point into."""
    return worker_splits(spec.dataset, spec.train_size, spec.val_size, spec.test_size, CPU).test_x


def _parse(zoo, **sections):
    space = copy.deepcopy(zoo[0])
    del space["stitching"]
    return parse_space({**space, **sections})


@pytest.mark.slow
def test_least_squares_penultimate_self_stitching_agrees_with_the_network_on_every_example(zoo):
    space, sweep_dir = zoo
    space = copy.deepcopy(space)
    space["stitching"].update(stitch_points=["penultimate"], objectives=["dm"])
    space["evaluation"]["n_eval_robust"] = 0
    (spec,) = parse_space(space).trials
    assert spec.point_index == spec.n_points + 1  # after the last stitch point
    row = run_trial(spec, sweep_dir)
    assert row["status"] == "done", row.get("error")
    # the same network as body and head: the donors never disagree (exact by construction), and the stitched
    # network agrees with the head on every example but the head's near ties (tests/ties.py)
    assert row["n_disagree"] == 0 and row["dm_residual"] < 1e-4
    assert_reproduces(row, *end_logits(sweep_dir, spec))


@pytest.mark.slow
def test_inverting_a_networks_own_representation_reaches_a_small_relative_error(zoo):
    sweep = _parse(zoo, inversions={"name": "inv", "donors": ["zoo:plain_a"], "images": 12, "steps": 150})
    (spec,) = sweep.units["inversion"]
    assert (spec.point, spec.step_size, spec.momentum, spec.start) == ("penultimate", 0.125, 0.9, "other_image")
    ctx = RunContext(zoo[1], CPU)
    assert run_inversion(spec, ctx)["status"] == "done"
    rows = analysis.load(zoo[1].path)["inversions"].query("unit_id == @spec.unit_id")
    assert len(rows) == 12 and (rows["seed_label"] != rows["label"]).all()  # seeds of another label (3.2)
    assert rows["loss"].max() < 0.1 and (rows["loss"] < rows["loss_start"]).all()
    # the recorded loss is the stored image's relative error, recomputed here from the files
    arrays = read_inverted(zoo[1], spec.unit_id)
    g = split(load_donor(zoo[1], spec.donor_key, CPU), "penultimate")[0]
    with torch.no_grad():  # the targets: stored as their indices among the test images
        inv, tgt = torch.from_numpy(arrays["inverted"]), _test_images(spec)[torch.from_numpy(arrays["image"])]
        again = (g(inv) - g(tgt)).norm(dim=1) / g(tgt).norm(dim=1)
    np.testing.assert_allclose(again.numpy(), rows.sort_values("position")["loss"], rtol=1e-4)
    assert inv.min() >= 0 and inv.max() <= 1 and run_inversion(spec, ctx)["status"] == "skipped"


def test_the_l2_bound_holds_and_one_momentum_step_is_the_papers_update():
    """On a linear representation g(x) = W x the gradient is known in closed form: one step of Jones et al.'s
    update is s - step (1 - mu) grad / ||grad||; a small L2 bound around the seed holds for every image."""
    torch.manual_seed(0)
    w = torch.randn(5, 12)
    g = lambda x: x.flatten(1) @ w.T  # noqa: E731
    seed, target = torch.rand(4, 3, 2, 2) * 0.5 + 0.25, torch.rand(4, 3, 2, 2)
    t_rep = g(target)
    one = invert(g, seed, t_rep, steps=1, step_size=0.01, momentum=0.9)
    r = g(seed) - t_rep
    grad = (r @ w) / (r.norm(dim=1, keepdim=True) * t_rep.norm(dim=1, keepdim=True))
    expected = seed.flatten(1) - 0.01 * 0.1 * grad / grad.norm(dim=1, keepdim=True)
    torch.testing.assert_close(one.images.flatten(1), expected)
    assert (one.best_step == 1).all() and (one.loss < one.loss_start).all()
    # the second step carries the first: m2 = 0.9 m1 + 0.1 g2 / ||g2|| (a momentum reset every step would fail)
    two = invert(g, seed, t_rep, steps=2, step_size=0.01, momentum=0.9)
    m1 = 0.1 * grad / grad.norm(dim=1, keepdim=True)
    r2 = g(expected.view_as(seed)) - t_rep
    g2 = (r2 @ w) / (r2.norm(dim=1, keepdim=True) * t_rep.norm(dim=1, keepdim=True))
    m2 = 0.9 * m1 + 0.1 * g2 / g2.norm(dim=1, keepdim=True)
    torch.testing.assert_close(two.images.flatten(1), expected - 0.01 * m2)
    bounded = invert(g, seed, t_rep, steps=50, step_size=0.2, eps=0.3)
    dist = (bounded.images - seed).flatten(1).norm(dim=1)
    assert (dist <= 0.3 + 1e-6).all() and (dist > 0.25).any()  # the bound binds and holds
    torch.testing.assert_close(relative_error(g(bounded.images), t_rep), bounded.loss)


@pytest.mark.slow
def test_engstrom_recipe_starts_from_grey_noise_with_its_defaults(zoo):
    sweep = _parse(zoo, inversions={"donors": ["zoo:plain_a"], "recipe": "engstrom", "steps": 20, "images": 4})
    (spec,) = sweep.units["inversion"]
    assert (spec.start, spec.step_size, spec.momentum, spec.eps) == ("grey_noise", 1.0, 0.0, 1000.0)
    assert run_inversion(spec, RunContext(zoo[1], CPU))["status"] == "done"
    kept = stored.index(zoo[1].path, spec.unit_id)  # grey-noise seeds: no indices, the first ones in 8 bits
    seeds = kept["preview_seeds"]
    assert "seed_image" not in kept and len(seeds) == 4
    assert abs(seeds.mean() - 0.5) < 0.01 and 0.03 < seeds.std() < 0.07  # 0.5 + N(0, 1) / 20
    with pytest.raises(SpecError, match=r"inversions.point"):
        _parse(zoo, inversions={"donors": ["zoo:plain_a"], "point": "layer9"})


@pytest.mark.slow
def test_cka_of_a_model_with_itself_on_its_inverted_data_is_one(zoo):
    inversions = {"name": "inv", "donors": ["zoo:plain_a"], "images": 30, "steps": 60}
    pairs = [
        {"a": "zoo:plain_a", "b": "zoo:plain_a", "a_inputs": "inverted", "b_inputs": "inverted"},
        {"a": "zoo:plain_a", "b": "zoo:plain_b", "a_inputs": "inverted", "b_inputs": "inverted"},
    ]
    entry = {"inverted": "inv", "points": ["penultimate"], "estimator": "full", "pairs": pairs}
    sweep = _parse(zoo, inversions=inversions, similarity=entry)
    ctx = RunContext(zoo[1], CPU)
    for unit in sweep.units["inversion"] + sweep.units["similarity"]:
        run = run_inversion if unit in sweep.units["inversion"] else run_similarity
        assert run(unit, ctx)["status"] == "done"
    got = analysis.load(zoo[1].path)["similarity"].query("inverted == 'inv'").set_index("b")
    assert got.loc["zoo:plain_a", "cka"] == pytest.approx(1.0) and got.loc["zoo:plain_b", "cka"] < 1
    assert (got["images"] == 30).all()
    # A ~ B on A's inverted images, recomputed here from the saved images (linear CKA written out in numpy)
    (inv_unit,) = sweep.units["inversion"]
    images = torch.from_numpy(read_inverted(zoo[1], inv_unit.unit_id)["inverted"])
    reps = []
    for ref in ("plain_a", "plain_b"):
        front = split(load_donor(zoo[1], sweep.donors[ref].donor_key, CPU), "penultimate")[0]
        with torch.no_grad():
            rep = front(images).double().numpy()
        reps.append(rep - rep.mean(0))
    a, b = reps
    cka = np.linalg.norm(b.T @ a) ** 2 / (np.linalg.norm(a.T @ a) * np.linalg.norm(b.T @ b))
    assert got.loc["zoo:plain_b", "cka"] == pytest.approx(cka, rel=1e-6)
    with pytest.raises(SpecError, match=r"similarity.inverted"):
        _parse(zoo, inversions=inversions, similarity=dict(entry, inverted="nope"))


def test_saliency_cosine_matches_the_closed_form_of_linear_models():
    """For logits W x + b the saliency map of class y is row y of W: the cosine is computed here from W."""
    torch.manual_seed(0)
    a, b = torch.nn.Linear(12, 4), torch.nn.Linear(12, 4)
    flat = lambda m: lambda x: m(x.flatten(1))  # noqa: E731
    x, y = torch.rand(9, 3, 2, 2), torch.randint(0, 4, (9,))
    got = saliency_cosines(flat(a), flat(b), x, x, y, CPU, batch=4)
    wa, wb = a.weight.detach().double()[y], b.weight.detach().double()[y]
    expected = (wa * wb).sum(1) / (wa.norm(dim=1) * wb.norm(dim=1))
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(saliency_cosines(flat(a), flat(a), x, x, y, CPU), torch.ones(9, dtype=torch.float64))


def test_robustness_level_tables_by_hand():
    """Levels come from the donors' training eps (plain: 0); pairs are of different donors; the means, stds
    and counts are worked out here by hand."""
    import pandas as pd

    from analysis.charts import robustness

    donors = pd.DataFrame(
        {
            "ref": ["zoo:r0", "zoo:v0", "zoo:r1", "zoo:v1", "robustbench:x"],
            "arch": ["r", "v", "r", "v", "v"],
            "training": ["plain", "plain", "pgd_l2", "pgd_l2", "robustbench"],
            "train_eps": [None, None, 1.0, 1.0, None],  # a RobustBench model: budget unknown, left out
        }
    )
    rows = [  # (a, b, inputs, cka)
        ("zoo:r0", "zoo:v0", "inverted", 0.1),
        ("zoo:v0", "zoo:r0", "inverted", 0.3),
        ("zoo:r0", "zoo:v0", "benign", 0.7),
        ("zoo:r1", "zoo:v1", "inverted", 0.8),
        ("zoo:r0", "zoo:r0", "inverted", 1.0),  # a donor with itself: left out
        ("zoo:r1", "zoo:v0", "inverted", 0.5),  # across levels: Fig. 6 only
        ("zoo:r1", "robustbench:x", "inverted", 0.9),  # unknown level: in no table
    ]
    sim = pd.DataFrame(
        [
            dict(a=a, b=b, a_inputs=i, b_inputs=i, cka=c, status="done", measure="cka")
            | dict(a_point="penultimate", b_point="penultimate")
            for a, b, i, c in rows
        ]
    )
    by = robustness.cka_by_level(sim, donors).set_index(["eps", "data"])
    assert by.loc[(0.0, "inverted"), "cka"] == pytest.approx(0.2) and by.loc[(0.0, "inverted"), "pairs"] == 2
    assert by.loc[(0.0, "inverted"), "std"] == pytest.approx(np.std([0.1, 0.3], ddof=1))
    assert by.loc[(0.0, "natural"), "cka"] == pytest.approx(0.7) and by.loc[(1.0, "inverted"), "cka"] == 0.8
    assert by["across"].all()
    across = robustness.cka_across_levels(sim, donors).set_index(["a_eps", "b_eps"])["cka"]
    assert across[(1.0, 0.0)] == 0.5 and across[(0.0, 0.0)] == pytest.approx(0.2) and (0.0, 1.0) not in across
    benign, inverted = dict(a_inputs="benign", b_inputs="benign"), dict(a_inputs="inverted", b_inputs="inverted")
    sal = pd.DataFrame(
        [
            dict(a="zoo:r0", b="zoo:v0", saliency_cosine=0.1, measure="saliency", status="done", **benign),
            dict(a="zoo:r1", b="zoo:v1", saliency_cosine=0.6, measure="saliency", status="done", **benign),
            dict(a="zoo:r1", b="zoo:v1", saliency_cosine=0.4, measure="saliency", status="done", **benign),
            dict(a="zoo:r1", b="zoo:v1", saliency_cosine=0.9, measure="saliency", status="done", **inverted),
        ]
    )
    s = robustness.saliency_by_level(sal, donors).set_index("eps")
    assert s.loc[1.0, "cosine"] == pytest.approx(0.5) and s.loc[1.0, "pairs"] == 2 and s.loc[0.0, "pairs"] == 1
    trials = pd.DataFrame(
        [
            dict(front=f, end=e, head_agreement=h, status="done", objective="dm")
            | dict(front_point="penultimate", end_point="penultimate")
            for f, e, h in [("zoo:r1", "zoo:v1", 0.9), ("zoo:v1", "zoo:r1", 0.7), ("zoo:r0", "zoo:v1", 0.1)]
        ]
    )
    agree = robustness.agreement_by_level(trials, donors)
    assert len(agree) == 1 and agree["eps"][0] == 1.0 and agree["head_agreement"][0] == pytest.approx(0.8)
    assert agree["head_agreement_se"][0] == pytest.approx(np.std([0.9, 0.7], ddof=1) / 2**0.5)


def test_architecture_matrices_mirror_natural_pairs_and_keep_inverted_ones_directed(tmp_path):
    """Figs 3-4's heatmaps from hand-made units: natural CKA fills both cells of a pair measured one way (and a
    pair measured both ways counts once per direction), inverted CKA stays directed (the row's inversions),
    cells average the pairs of donors of two architectures, levels stay apart."""
    import pandas as pd

    from analysis.charts import robustness
    from analysis.report.write import _png

    donors = pd.DataFrame(
        {"ref": ["zoo:r0", "zoo:v0", "zoo:w0", "zoo:v0b", "zoo:r1", "zoo:v1"], "arch": ["r", "v", "w", "v", "r", "v"],
         "training": ["plain"] * 4 + ["pgd_l2"] * 2, "train_eps": [None] * 4 + [1.0, 1.0]}
    )  # fmt: skip
    rows = [  # a, b, inputs, cka
        ("zoo:r0", "zoo:v0", "benign", 0.4),
        ("zoo:v0", "zoo:r0", "benign", 0.6),  # the same pair the other way: each direction keeps its own
        ("zoo:r0", "zoo:v0b", "benign", 0.8),
        ("zoo:r0", "zoo:w0", "benign", 0.3),
        ("zoo:r0", "zoo:v0", "inverted", 0.2),
        ("zoo:v0", "zoo:r0", "inverted", 0.9),
        ("zoo:r1", "zoo:v1", "benign", 0.7),
        ("zoo:r1", "zoo:v0", "inverted", 0.5),  # across levels: Fig. 6's grid only
    ]
    sim = pd.DataFrame(
        [
            dict(a=a, b=b, a_inputs=i, b_inputs=i, cka=c, status="done", measure="cka")
            | dict(a_point="penultimate", b_point="penultimate")
            for a, b, i, c in rows
        ]
    )
    m = robustness.arch_matrices(sim, donors).set_index(["eps", "data", "a_arch", "b_arch"])
    assert m.loc[(0.0, "natural", "r", "v"), "cka"] == pytest.approx((0.4 + 0.8) / 2)  # r0~v0 and r0~v0b
    assert m.loc[(0.0, "natural", "v", "r"), "cka"] == pytest.approx((0.6 + 0.8) / 2)  # v0~r0 and v0b~r0 mirrored
    assert m.loc[(0.0, "natural", "w", "r"), "cka"] == pytest.approx(0.3)  # measured one way, both cells
    assert m.loc[(0.0, "inverted", "r", "v"), "cka"] == pytest.approx(0.2)
    assert m.loc[(0.0, "inverted", "v", "r"), "cka"] == pytest.approx(0.9)
    assert m.loc[(1.0, "natural", "v", "r"), "cka"] == pytest.approx(0.7) and len(m.loc[1.0]) == 2
    _png(robustness.arch_matrix_chart(m.reset_index()), tmp_path / "m.png")
    assert (tmp_path / "m.png").stat().st_size > 1000
    grid = robustness.across_levels_by_arch(sim, donors).set_index(["a_arch", "b_arch", "a_eps", "b_eps"])["cka"]
    assert grid.to_dict() == {("r", "v", 0.0, 0.0): 0.2, ("r", "v", 1.0, 0.0): 0.5, ("v", "r", 0.0, 0.0): 0.9}
    _png(robustness.across_levels_grid(grid.reset_index().assign(pairs=1)), tmp_path / "g.png")


def test_agreement_curves_are_the_level_means_with_a_one_se_band(tmp_path):
    """Figs 7-8 drawn as the paper does: per level, each agreement's mean over pairs of different donors, the
    band +- 1 standard error worked out here by hand (none for one pair); the chart renders."""
    import pandas as pd

    from analysis.charts import robustness
    from analysis.report.write import _png

    donors = pd.DataFrame(
        {"ref": ["zoo:a0", "zoo:b0", "zoo:a1", "zoo:b1"], "arch": ["r", "v", "r", "v"],
         "training": ["plain", "plain", "pgd_l2", "pgd_l2"], "train_eps": [None, None, 1.0, 1.0]}
    )  # fmt: skip
    rows = [  # front, end, (both correct, both wrong, disagree)
        ("zoo:a0", "zoo:b0", (0.9, 0.8, 0.2)),
        ("zoo:b0", "zoo:a0", (0.7, 0.6, 0.4)),
        ("zoo:a1", "zoo:b1", (0.95, 0.7, 0.5)),
    ]
    trials = pd.DataFrame(
        [
            dict(front=f, end=e, head_agreement=0.9, agree_both_correct=c, agree_both_wrong=w, agree_disagree=d)
            | dict(status="done", objective="dm", front_point="penultimate", end_point="penultimate")
            for f, e, (c, w, d) in rows
        ]
    )
    curves = robustness.agreement_curves(trials, donors).set_index(["eps", "measure"])
    se = np.std([0.2, 0.4], ddof=1) / 2**0.5
    plain = curves.loc[(0.0, "agree_disagree")]
    assert plain["agreement"] == pytest.approx(0.3) and plain["pairs"] == 2
    assert (plain["lo"], plain["hi"]) == (pytest.approx(0.3 - se), pytest.approx(0.3 + se))
    robust = curves.loc[(1.0, "agree_both_wrong")]
    assert robust["agreement"] == pytest.approx(0.7) and robust["lo"] == robust["hi"] == pytest.approx(0.7)
    assert len(curves) == 6
    _png(robustness.agreement_curve_chart(curves.reset_index()), tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 1000


@pytest.mark.slow
def test_the_report_shows_inversions_cka_by_level_and_saliency(zoo, tmp_path):
    from analysis.report.write import write_report

    inversions = {"name": "inv", "donors": ["zoo:plain_a", "zoo:plain_b"], "images": 6, "steps": 20}
    pairs = [{"a": "zoo:plain_a", "b": "zoo:plain_b", "a_inputs": "inverted", "b_inputs": "inverted"}]
    similarity = [
        {"inverted": "inv", "points": ["penultimate"], "estimator": "full", "pairs": pairs},
        {"measure": "saliency", "images": 20, "pairs": [{"a": "zoo:plain_a", "b": "zoo:plain_b"}]},
    ]
    sweep = _parse(zoo, inversions=inversions, similarity=similarity)
    ctx = RunContext(zoo[1], CPU)
    for unit in sweep.units["inversion"]:
        assert run_inversion(unit, ctx)["status"] in ("done", "skipped")
    for unit in sweep.units["similarity"]:
        assert run_similarity(unit, ctx)["status"] in ("done", "skipped")
    index = write_report(zoo[1].path, tmp_path / "report")
    html = index.read_text()
    assert (tmp_path / "report" / "inversions.png").stat().st_size > 1000
    assert "Inverted images" in html
    # both donors are plain: one robustness level, so the sweep's report leaves the by-level charts out (a
    # paper's page keeps them: tests/project/test_paper_layouts.py)
    for name in ("cka_by_level.png", "saliency_by_level.png", "cka_across_levels.png"):
        assert not (tmp_path / "report" / name).exists(), name
    assert "Saliency similarity by robustness level" not in html
    assert "CKA without stitching" not in html  # single-point units are not drawn as 1x1 matrices
    # Fig. 2's rows: the targets, then each unit's seed images (once while they repeat) and its inversions
    from analysis.charts import robustness

    images = robustness.inversion_images(zoo[1].path, analysis.load(zoo[1].path)["inversions"])
    labels = images["row"].drop_duplicates().tolist()
    assert (
        labels[0] == "targets" and labels[1].startswith("seeds (") and sum(x.startswith("seeds") for x in labels) >= 1
    )
    first = next(u for u in sweep.units["inversion"] if labels[2].startswith(u.donor))
    seeds = _test_images(first)[torch.from_numpy(stored.index(zoo[1].path, first.unit_id)["seed_image"][:2])]
    assert images[images["row"] == labels[1]]["url"].tolist()[:2] == [robustness.png_url(x) for x in seeds.numpy()]


@pytest.mark.parametrize("arch", ["tv_resnet18", "tv_mobilenet_v2"])
def test_torchvision_and_salman_checkpoints_map_onto_the_staged_network(arch, tmp_path):
    """A torchvision state dict and the same weights in Salman et al.'s robustness-library layout (`module.model.`
    keys, an `attacker.` copy, the normaliser's `new_mean` / `new_std`, wrapped with the epoch) both load, and
    compute what torchvision's own network computes on normalised inputs."""
    from sweep.models.external import load_checkpoint
    from sweep.models.imagenet_tv import reference

    torch.manual_seed(0)
    reference = reference(arch, 5).eval()
    for m in reference.modules():  # non-trivial BN statistics, so a mis-mapped buffer shows
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    sd = reference.state_dict()
    mean, std = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])
    torch.save(sd, tmp_path / "tv.pt")
    salman = {f"module.model.{k}": v for k, v in sd.items()} | {f"module.attacker.model.{k}": v for k, v in sd.items()}
    for prefix in ("module.", "module.attacker."):
        salman |= {f"{prefix}normalizer.new_mean": mean.view(3, 1, 1), f"{prefix}normalizer.new_std": std.view(3, 1, 1)}
    torch.save({"model": salman, "epoch": 90}, tmp_path / "salman.pt")
    x = torch.rand(3, 3, 32, 32)
    with torch.no_grad():
        expected = reference((x - mean.view(1, 3, 1, 1)) / std.view(1, 3, 1, 1))
    kw = dict(in_channels=3, num_classes=5, image_size=32)
    tv_model = load_checkpoint(tmp_path / "tv.pt", arch, mean=tuple(mean.tolist()), std=tuple(std.tolist()), **kw)
    robust = load_checkpoint(tmp_path / "salman.pt", arch, mean=(0.5,), std=(0.5,), **kw)  # its normaliser wins
    with torch.no_grad():
        torch.testing.assert_close(tv_model(x), expected, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(robust(x), expected, atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="does not fit architecture"):
        load_checkpoint(
            tmp_path / "tv.pt", "tv_resnet50" if arch == "tv_resnet18" else "tv_resnet18", mean=(0.5,), std=(0.5,), **kw
        )


@pytest.mark.slow
def test_a_salman_donor_loads_from_its_model_folder_with_its_eps(tmp_path):
    """`salman: resnet18_l2_eps3` reads `<model_dir>/resnet18_l2_eps3.ckpt` (here a small randomly initialised
    one in the robustness library's layout, on a 3-class ImageNet folder), records its training budget as the
    robustness level, and predicts what torchvision's network with those weights predicts."""
    from PIL import Image

    from sweep.data.core import make_splits
    from sweep.models.imagenet_tv import reference

    for part in ("train", "val"):
        for c in range(3):
            d = tmp_path / "data" / "imagenet" / part / f"n{c:08d}"
            d.mkdir(parents=True)
            for k in range(4):
                Image.fromarray(np.full((240, 300, 3), 60 * c + 10 * k, dtype=np.uint8)).save(d / f"{k}.png")
    torch.manual_seed(0)
    reference = reference("tv_resnet18", 3).eval()
    mean, std = torch.tensor([0.4, 0.5, 0.6]), torch.tensor([0.2, 0.3, 0.25])
    sd = {f"module.model.{k}": v for k, v in reference.state_dict().items()}
    sd |= {"module.normalizer.new_mean": mean.view(3, 1, 1), "module.normalizer.new_std": std.view(3, 1, 1)}
    (tmp_path / "models").mkdir()
    torch.save({"model": sd, "epoch": 1}, tmp_path / "models" / "resnet18_l2_eps3.ckpt")
    space = {
        "name": "salman",
        "data": {"dataset": "imagenet", "root": str(tmp_path / "data"), "download": False, "val_size": 3},
        "donors": {"r18": {"salman": "resnet18_l2_eps3", "model_dir": str(tmp_path / "models")}},
        "inversions": {"donors": ["salman:r18"], "images": 2, "steps": 1},
        "evaluation": {"n_eval_robust": 0},
    }
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path / "results", sweep.name)
    sweep_dir.create()
    row = run_donor(sweep.donors["r18"], sweep.donor_evals["r18"], sweep_dir, CPU, data_root=str(tmp_path / "data"))
    assert row["status"] == "done", row.get("error")
    assert (row["training"], row["train_eps"], row["arch"]) == ("pgd_l2", 3.0, "tv_resnet18")
    splits = make_splits("imagenet", None, 3, None, root=str(tmp_path / "data"), download=False)
    with torch.no_grad():
        expected = reference((splits.test_x - mean.view(1, 3, 1, 1)) / std.view(1, 3, 1, 1))
        got = load_donor(sweep_dir, sweep.donors["r18"].donor_key, CPU)(splits.test_x)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert row["clean_acc"] == int((expected.argmax(1) == splits.test_y).sum()) / len(splits.test_y)
    with pytest.raises(SpecError, match=r"donors.r18.salman"):
        parse_space({**space, "donors": {"r18": {"salman": "resnet18_l2_eps4"}}})


@pytest.mark.slow
def test_a_trial_keeps_its_stitcher_and_its_stitched_network_is_inverted(zoo):
    """A trial writes its stitcher (with `donor_bn: update`, the donors' moved BatchNorm statistics too); the
    stitched network rebuilt from it predicts what the trial measured. An inversion entry selects the trial;
    without a kept stitcher the unit fits it again, says so, and the refit predicts the same."""
    from sweep.data.core import make_splits
    from sweep.kinds.trial.stitched import stitched_network

    space, sweep_dir = zoo
    space = copy.deepcopy(space)
    space["stitching"].update(stitch_points=["layer1.0"], objectives=["tlm", "dm"], donor_bn="update")
    space["evaluation"]["n_eval_robust"] = 0
    pick = {"front": "zoo:plain_a", "end": "zoo:plain_a", "point": "layer1.0", "objective": "tlm"}
    space["inversions"] = {"stitched": [pick], "point": "layer3.1", "images": 5, "steps": 10}
    sweep = parse_space(space)
    trial = next(t for t in sweep.trials if t.objective == "tlm")
    row = run_trial(trial, sweep_dir)
    assert row["status"] == "done", row.get("error")
    assert sweep_dir.stitcher(trial.trial_id).exists()
    splits = make_splits(trial.dataset, trial.train_size, trial.val_size, trial.test_size)

    def accuracy_of(stitched):
        with torch.no_grad():
            pred = stitched.upto(trial.end_point)(splits.test_x).argmax(1)
        return int((pred == splits.test_y).sum()) / len(splits.test_y)

    # the kept stitcher, loaded and run in one batch here, gives the trial's accuracy: the same weights, so the
    # counts can differ only by images within rounding of a tie of the stitched network (evaluation batches differ)
    kept = stitched_network(trial, RunContext(sweep_dir, CPU))
    with torch.no_grad():
        kept_logits = kept.upto(trial.end_point)(splits.test_x)
    n = len(splits.test_y)
    assert abs(count(accuracy_of(kept), n) - count(row["clean_acc"], n)) <= near_ties(kept_logits)
    (unit,) = sweep.units["inversion"]
    assert unit.trial_id == trial.trial_id and unit.arch == "resnet_tiny"
    assert run_inversion(unit, RunContext(sweep_dir, CPU))["status"] == "done"
    rows = analysis.load(sweep_dir.path)["inversions"].query("unit_id == @unit.unit_id")
    assert len(rows) == 5 and not rows["stitcher_refitted"].any() and (rows["trial_id"] == trial.trial_id).all()
    sweep_dir.stitcher(trial.trial_id).unlink()  # as a trial recorded before stitchers were kept
    again = parse_space({**space, "inversions": dict(space["inversions"], seed=1)}).units["inversion"][0]
    assert run_inversion(again, RunContext(sweep_dir, CPU))["status"] == "done"
    rows = analysis.load(sweep_dir.path)["inversions"].query("unit_id == @again.unit_id")
    assert rows["stitcher_refitted"].all() and sweep_dir.stitcher(trial.trial_id).exists()
    # the same seeded fit, refitted: the same accuracy, up to near ties of the refit network
    refit = stitched_network(trial, RunContext(sweep_dir, CPU))
    with torch.no_grad():
        refit_logits = refit.upto(trial.end_point)(splits.test_x)
    assert abs(count(accuracy_of(refit), n) - count(row["clean_acc"], n)) <= near_ties(refit_logits)
    with pytest.raises(SpecError, match=r"inversions.stitched\[0\].*2 trials match"):
        loose = {k: v for k, v in pick.items() if k != "objective"}  # tlm and dm both match
        parse_space({**space, "inversions": dict(space["inversions"], stitched=[loose])})


@pytest.mark.slow
def test_tsne_keeps_well_separated_classes_apart_and_a_unit_maps_every_point(zoo, tmp_path):
    """Balogh & Jelasity 2023 Fig. 7: three far-apart Gaussian blobs stay apart in 2-D (every dot's nearest
    neighbour has its class); a unit gives one row per (point, image) with the images' own labels, and the
    report draws it."""
    from analysis.report.write import write_report
    from sweep.data.core import make_splits
    from sweep.kinds.tsne.run import run_embedding, tsne_2d

    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 20)
    blobs = torch.tensor(rng.normal(size=(60, 10)) + 20.0 * np.eye(3, 10)[labels])
    xy, kl = tsne_2d(blobs, 30.0, 0)
    dist = ((xy[:, None, :] - xy[None, :, :]) ** 2).sum(-1) + np.eye(60) * 1e9
    assert (labels[dist.argmin(1)] == labels).all() and np.isfinite(kl)
    sweep = _parse(zoo, tsne={"donors": ["zoo:plain_a"], "points": ["layer1.0", "layer3.1"], "images": 40})
    (unit,) = sweep.units["tsne"]
    assert run_embedding(unit, RunContext(zoo[1], CPU))["status"] == "done"
    rows = analysis.load(zoo[1].path)["tsne"]
    assert len(rows) == 80 and set(rows["point"]) == {"layer1.0", "layer3.1"} and rows[["x", "y"]].notna().all().all()
    splits = make_splits(unit.dataset, unit.train_size, unit.val_size, unit.test_size)
    assert (splits.test_y.numpy()[rows["image"].to_numpy()] == rows["label"].to_numpy()).all()
    write_report(zoo[1].path, tmp_path / "report")
    assert (tmp_path / "report" / "tsne.png").stat().st_size > 1000


def test_each_figure_averages_one_stated_population_of_architectures():
    """Jones et al. Figs 1, 5, 6, 7-8 (review finding): at eps 0 three architectures, at eps 1 two. A curve over
    levels averages the two present at every level (the third's pairs at eps 0 are left out, or eps 0 would
    average another population); Fig. 6's cell (0, 0) takes the three present at both its levels, the cells
    with eps 1 the two. The counts are in the rows."""
    import pandas as pd

    from analysis.charts import robustness

    donors = pd.DataFrame(
        {
            "ref": ["zoo:r0", "zoo:v0", "zoo:w0", "zoo:r1", "zoo:v1"],
            "arch": ["r", "v", "w", "r", "v"],
            "training": ["plain", "plain", "plain", "pgd", "pgd"],
            "train_eps": [None, None, None, 1.0, 1.0],
        }
    )
    pairs = [("zoo:r0", "zoo:v0", 0.2), ("zoo:r0", "zoo:w0", 0.9), ("zoo:w0", "zoo:v0", 0.9)]
    pairs += [("zoo:r1", "zoo:v1", 0.6), ("zoo:r1", "zoo:v0", 0.4), ("zoo:r1", "zoo:w0", 0.9)]
    sim = pd.DataFrame(
        [
            dict(a=a, b=b, a_inputs="inverted", b_inputs="inverted", cka=c, status="done", measure="cka")
            | dict(a_point="penultimate", b_point="penultimate")
            for a, b, c in pairs
        ]
    )
    by = robustness.cka_by_level(sim, donors).set_index("eps")
    assert by.loc[0.0, "cka"] == pytest.approx(0.2) and by.loc[0.0, "pairs"] == 1 and by.loc[0.0, "archs"] == 2
    assert by.loc[1.0, "cka"] == pytest.approx(0.6) and by.loc[1.0, "pairs"] == 1
    cells = robustness.cka_across_levels(sim, donors).set_index(["a_eps", "b_eps"])
    assert cells.loc[(0.0, 0.0), "pairs"] == 3 and cells.loc[(0.0, 0.0), "archs"] == 3
    assert cells.loc[(1.0, 0.0), "cka"] == pytest.approx(0.4) and cells.loc[(1.0, 0.0), "pairs"] == 1
    chart = robustness.across_levels_chart(cells.reset_index()).to_dict()
    assert [
        layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in chart["layer"]
    ] == [
        "rect",
        "text",
    ]


@pytest.fixture(scope="module")
def imagenet(tmp_path_factory):
    """Made-up results of every unit the paper-scale space `jones_imagenet.yaml` plans (`tests/synthetic.py`)."""
    from analysis.report.data import report_data
    from tests.conftest import REPO
    from tests.synthetic import synthetic_results

    root = tmp_path_factory.mktemp("synthetic") / "jones_imagenet"
    return report_data(synthetic_results(REPO / "search_spaces" / "jones_imagenet.yaml", root))[0]


def test_figs_3_4_numbers_are_the_means_of_the_drawn_heatmaps(imagenet):
    """Jones et al. Figs 3-4: the paper's 0.67 / 0.09 / 0.83 / 0.80 are means over its
    9-architecture heatmaps, so ours is the mean of the distinct-architecture cells of the heatmap the page
    draws at that level and data: 9 architectures, 72 cells of one pair each at the paper's scale."""
    from analysis.papers import items
    from analysis.report.paper import item_rows, ours

    checked = 0
    for it in items("jones-2022"):
        if it.item not in ("Fig. 3", "Fig. 4"):
            continue
        for n in it.numbers:
            eps, data = n.ours.where["eps"], n.ours.where["data"]
            [(_, drawn)] = item_rows(it, "arch_matrices", [imagenet])
            heat = drawn[(drawn["eps"] == eps) & (drawn["data"] == data)]
            off = heat[heat["a_arch"] != heat["b_arch"]]
            assert heat["a_arch"].nunique() == 9 and heat["b_arch"].nunique() == 9, (it.item, n.row)
            assert len(off) == 72 and (off["pairs"] == 1).all(), (it.item, n.row)
            assert ours(n, imagenet) == pytest.approx(off["cka"].mean(), rel=1e-12), (it.item, n.row)
            checked += 1
    assert checked == 4


def test_fig_1_cells_count_the_pairs_and_architectures_measured(imagenet):
    """Jones et al. Fig. 1: each cell of `cka_across_levels` averages every ordered pair of two
    different architectures present at both its levels (Section 4.3: "Average comparisons between all
    architectures are shown in Figure 1"), and `archs` counts the architectures in the pairs it averages,
    worked out here from the similarity table itself."""
    from analysis.charts import robustness

    lv = robustness.levels(imagenet.donors)
    s = imagenet.similarity
    s = s[(s["status"] == "done") & (s["a_inputs"] == "inverted") & (s["b_inputs"] == "inverted")]
    s = s[s["a"].isin(lv.index) & s["b"].isin(lv.index)]
    a_eps, b_eps = s["a"].map(lv["eps"]), s["b"].map(lv["eps"])
    cells = robustness.cka_across_levels(imagenet.similarity, imagenet.donors).set_index(["a_eps", "b_eps"])
    assert len(cells) == 100  # ten levels each way
    for (x, y), row in cells.iterrows():
        present = set(lv[lv["eps"] == x]["arch"]) & set(lv[lv["eps"] == y]["arch"])
        cell = s[(a_eps == x) & (b_eps == y)]
        cell = cell[cell["a"].map(lv["arch"]).isin(present) & cell["b"].map(lv["arch"]).isin(present)]
        measured = set(cell["a"].map(lv["arch"])) | set(cell["b"].map(lv["arch"]))
        assert measured == present, (x, y)  # every architecture present at both levels is measured
        assert row["archs"] == len(measured) and row["pairs"] == len(present) * (len(present) - 1), (x, y)
        assert row["cka"] == pytest.approx(cell["cka"].mean(), rel=1e-12), (x, y)
    assert cells.loc[(0.0, 0.0), ["pairs", "archs"]].tolist() == [72, 9]
    assert cells.loc[(0.0, 3.0), ["pairs", "archs"]].tolist() == [72, 9]
    assert cells.loc[(0.0, 0.01), ["pairs", "archs"]].tolist() == [12, 4]
    # Fig. 6's grid (the registry's layout note): 72 blocks of two different architectures, full (10 x 10 levels)
    # only between two ResNets
    grid = robustness.across_levels_by_arch(imagenet.similarity, imagenet.donors)
    assert (grid["a_arch"] != grid["b_arch"]).all()
    assert grid.groupby(["a_arch", "b_arch"]).size().value_counts().to_dict() == {100: 12, 20: 40, 4: 20}


def test_a_cells_architecture_count_is_of_the_pairs_it_averages():
    """Three architectures have donors at both levels but the cell (1, 0) holds one pair: it counts the two
    architectures of that pair, not the three whose donors exist."""
    import pandas as pd

    from analysis.charts import robustness

    donors = pd.DataFrame(
        {"ref": ["r0", "v0", "w0", "r1", "v1", "w1"], "arch": ["r", "v", "w"] * 2,
         "training": ["plain"] * 3 + ["pgd"] * 3, "train_eps": [None] * 3 + [1.0] * 3}
    )  # fmt: skip
    sim = pd.DataFrame(
        [
            dict(a=a, b=b, a_inputs="inverted", b_inputs="inverted", cka=c, status="done", measure="cka")
            | dict(a_point="penultimate", b_point="penultimate")
            for a, b, c in [("r1", "v0", 0.4), ("r0", "v0", 0.2), ("v0", "w0", 0.6)]
        ]
    )
    cells = robustness.cka_across_levels(sim, donors).set_index(["a_eps", "b_eps"])
    assert cells.loc[(1.0, 0.0), ["pairs", "archs"]].tolist() == [1, 2]
    assert cells.loc[(0.0, 0.0), ["pairs", "archs"]].tolist() == [2, 3]
    by = robustness.cka_by_level(sim, donors).set_index("eps")
    assert by.loc[0.0, ["pairs", "archs"]].tolist() == [2, 3]
