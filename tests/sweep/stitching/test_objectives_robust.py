"""Robust stitching (Balogh & Jelasity 2023): the adversarial objectives' math, the stitcher options, TRADES donors and
cross-task stitching, end to end on the digits (and Fashion-MNIST for cross-task)."""

import copy
import dataclasses

import pytest
import torch
from torch import nn

from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.data.core import make_splits
from sweep.kinds.donor.run import run_donor
from sweep.kinds.trial.run import run_trial
from sweep.models.base import build, split, stitch_points
from sweep.stitching.objectives import (
    OBJECTIVES,
    FitContext,
    adv_loss,
    adv_mix_count,
    adv_mix_loss,
    direct_match,
)
from sweep.stitching.stitcher import Stitcher
from sweep.store.results import SweepDir
from sweep.train.attacks import kl_divergence, pgd_linf, trades_linf, trades_loss
from tests.conftest import TINY_SPACE


def _net(seed=0):
    torch.manual_seed(seed)
    return build("resnet_tiny", 1, 10, (0.1,), (0.25,), image_size=28).eval()


@pytest.fixture(scope="module")
def batch():
    splits = make_splits("digits", None, 200, None)
    return splits.train_x[:32], splits.train_y[:32]


# ---------------------------------------------------------------------------------------------- attacks


@pytest.mark.parametrize("random_start", [True, False])
def test_pgd_stays_in_the_eps_ball_and_in_pixel_range_and_raises_the_loss(batch, random_start):
    x, y = batch
    net = _net()
    x_adv = pgd_linf(
        net,
        x,
        y,
        eps=0.3,
        step_size=0.1,
        steps=10,
        random_start=random_start,
        generator=torch.Generator().manual_seed(0),
    )
    assert (x_adv - x).abs().max() <= 0.3 + 1e-6
    assert x_adv.min() >= 0.0 and x_adv.max() <= 1.0
    ce = nn.CrossEntropyLoss()
    with torch.no_grad():
        assert ce(net(x_adv), y) > ce(net(x), y)


def test_trades_attack_stays_in_the_ball_and_raises_the_kl(batch):
    x, _ = batch
    net = _net()
    x_adv = trades_linf(net, x, eps=0.3, step_size=0.1, steps=10, generator=torch.Generator().manual_seed(0))
    assert (x_adv - x).abs().max() <= 0.3 + 1e-6 and x_adv.min() >= 0.0 and x_adv.max() <= 1.0
    with torch.no_grad():
        p = torch.softmax(net(x), 1)
        assert kl_divergence(p, net(x_adv)) > 10 * kl_divergence(p, net(x)).abs() + 1e-4


# ------------------------------------------------------------------------------------------ batch losses


def test_adv_with_alpha_zero_is_the_task_loss_and_mixes_linearly(batch):
    x, y = batch
    net = _net()
    x_adv = pgd_linf(net, x, y, 0.3, 0.1, 3, generator=torch.Generator().manual_seed(1))
    ce = nn.CrossEntropyLoss()
    clean, adv = ce(net(x), y), ce(net(x_adv), y)
    # exact by construction: at alpha 0 the objective is the clean loss itself, the same kernels on the same batch
    assert torch.equal(adv_loss(net, x, y, x_adv, 0.0), clean)
    assert torch.equal(adv_loss(net, x, y, None, 0.0), clean)  # no attack needed at alpha 0
    assert torch.allclose(adv_loss(net, x, y, x_adv, 0.25), 0.75 * clean + 0.25 * adv)
    assert torch.allclose(adv_loss(net, x, y, x_adv, 1.0), adv)


def test_adv_mix_replaces_a_fraction_of_the_batch(batch):
    x, y = batch
    net = _net()
    k = adv_mix_count(len(y), 0.5)
    assert k == 16 and adv_mix_count(len(y), 0.0) == 0 and adv_mix_count(len(y), 1.0) == 32
    x_adv = pgd_linf(net, x[:k], y[:k], 0.3, 0.1, 3, random_start=False)
    ce = nn.CrossEntropyLoss(reduction="sum")
    want = (ce(net(x_adv), y[:k]) + ce(net(x[k:]), y[k:])) / len(y)
    assert torch.allclose(adv_mix_loss(net, x, y, x_adv, 0.5), want, atol=1e-6)
    assert torch.equal(adv_mix_loss(net, x, y, None, 0.0), nn.CrossEntropyLoss()(net(x), y))  # the same computation


def test_trades_with_beta_zero_is_plain_cross_entropy(batch):
    x, y = batch
    net = _net()
    x_adv = trades_linf(net, x, 0.3, 0.1, 3, generator=torch.Generator().manual_seed(0))
    ce = nn.CrossEntropyLoss()(net(x), y)
    assert torch.equal(trades_loss(net, x, y, x_adv, 0.0), ce)  # exact: at beta 0 the same computation as ce
    with torch.no_grad():
        # KL(p || q) written out: sum_c p_c (log p_c - log q_c), averaged over the batch
        p, q = torch.softmax(net(x).double(), 1), torch.softmax(net(x_adv).double(), 1)
        kl = (p * (p.log() - q.log())).sum(1).mean()
        assert kl > 0
        assert torch.allclose(trades_loss(net, x, y, x_adv, 2.5).double(), ce.double() + 2.5 * kl, atol=1e-5)
        assert torch.allclose(kl_divergence(p.float(), net(x_adv)).double(), kl, atol=1e-6)
        assert kl_divergence(torch.softmax(net(x), 1), net(x)).abs() < 1e-6  # KL(p || p) = 0


# ----------------------------------------------------------------------------------------- the stitcher


def test_identity_init_reproduces_the_unstitched_network_exactly(batch):
    x, _ = batch
    net = _net()
    for point in stitch_points("resnet_tiny"):
        front, end = split(net, point)
        with torch.no_grad():
            a = front(x)
            stitcher = Stitcher.for_shapes(a.shape, a.shape, "identity").eval()
            # exact by construction: an identity 1x1 map multiplies by exact ones and adds exact zeros
            assert torch.equal(end(stitcher(a)), net(x)), point


def test_bn_affine_bn_stitcher_is_batchnorm_map_batchnorm_and_near_identity_at_identity_init(batch):
    x, _ = batch
    net = _net()
    front, end = split(net, "layer2.0")
    with torch.no_grad():
        a = front(x)
        s = Stitcher.for_shapes(a.shape, a.shape, "identity", "bn_affine_bn").eval()
        assert isinstance(s.bn_in, nn.BatchNorm2d) and isinstance(s.bn_out, nn.BatchNorm2d)
        # eval-mode BatchNorms at their initial statistics divide by sqrt(1 + eps) each
        assert torch.allclose(s(a), a / (1 + 1e-5), rtol=1e-6, atol=1e-6)
        tokens = Stitcher.for_shapes(torch.Size([2, 5, 8]), torch.Size([2, 5, 8]), "identity", "bn_affine_bn")
        t = torch.randn(4, 5, 8)
        assert tokens.train()(t).shape == t.shape


def _ctx(net, point, spec_fields, splits):
    front, end = split(net, point)
    end_front, _ = split(net, point)
    with torch.no_grad():
        shape = front(splits.train_x[:2]).shape
    spec = type("Spec", (), dict(spec_fields))()
    stitcher = Stitcher.for_shapes(shape, shape, "random", spec.stitcher)
    return FitContext(
        front=front,
        end=end,
        stitcher=stitcher,
        splits=splits,
        spec=spec,
        device=torch.device("cpu"),
        end_front=end_front,
    )


@pytest.mark.parametrize("kind", ["affine", "bn_affine_bn"])
def test_direct_matching_self_stitch_is_exact_for_both_stitchers(kind):
    splits = make_splits("digits", None, 200, None)
    net = _net()
    ctx = _ctx(net, "layer2.1", {"dm_samples": 50, "stitcher": kind}, splits)
    out = direct_match(ctx)
    assert out["dm_residual"] < 1e-5
    x = splits.test_x[:64]
    with torch.no_grad():
        assert torch.allclose(ctx.end(ctx.stitcher.eval()(ctx.front(x))), net(x), atol=1e-3)


def test_direct_matching_refuses_too_few_samples_and_says_how_many():
    splits = make_splits("digits", None, 200, None)
    ctx = _ctx(_net(), "layer3.1", {"dm_samples": 1, "stitcher": "affine"}, splits)
    c = ctx.front(splits.train_x[:1]).shape
    with pytest.raises(ValueError, match=r"dm_samples: K=1 .* needs K >= \d+"):
        direct_match(ctx)
    assert c[2] * c[3] < c[1] + 1  # the point really is under-determined with one image


def _fit_stitcher_weights(objective: str, alpha: float) -> torch.Tensor:
    """The weights of a stitcher fitted by `objective` at layer2.0 of a fixed net (the same seed and data for
    every objective, so two objectives that compute the same loss train the same weights)."""
    splits = make_splits("digits", 300, 100, None)
    fields = dict(
        epochs=1, lr=0.01, batch_size=64, init="random", donor_bn="frozen", seed=3, stitcher="affine",
        objective="tlm", precision="fp32", channels_last=False, alpha=alpha, adv_eps=0.3, adv_step_size=0.1,
        adv_steps=2, adv_random_start=True, optimizer="adam", weight_decay=1e-4, momentum=None,
        lr_schedule="step",
    )  # fmt: skip
    torch.manual_seed(0)
    ctx = _ctx(_net(), "layer2.0", fields, splits)
    OBJECTIVES[objective].fit(ctx)
    return ctx.stitcher.map.weight.detach().clone()


def test_adv_with_alpha_one_trains_on_the_pgd_examples(monkeypatch):
    """alpha > 0 really trains on PGD's output: with PGD replaced by one that returns the clean batch, adv
    with alpha 1 trains exactly tlm's stitcher (and PGD ran once per batch); with the real PGD it does not."""
    import sweep.stitching.objectives as objectives

    tlm, adv_real = _fit_stitcher_weights("tlm", 1.0), _fit_stitcher_weights("adv", 1.0)
    calls = []

    def clean(model, x, y, *args, **kwargs):
        calls.append(len(y))
        return x.detach().clone()

    monkeypatch.setattr(objectives, "pgd_linf", clean)
    adv_clean = _fit_stitcher_weights("adv", 1.0)
    # exact by construction: with the attack returning the clean batch, the same seeded steps on the same batches
    assert torch.equal(adv_clean, tlm) and sum(calls) == 300 and len(calls) == 5
    assert not torch.allclose(adv_real, tlm, atol=1e-4)


def test_adv_with_alpha_zero_trains_the_same_stitcher_as_tlm():
    # exact by construction: at alpha 0 the adv objective runs tlm's steps (no attack), in one process on one machine
    assert torch.equal(_fit_stitcher_weights("tlm", 0.0), _fit_stitcher_weights("adv", 0.0))


# ------------------------------------------------------------------------------------ the search space


ROBUST_SPACE = copy.deepcopy(TINY_SPACE)
ROBUST_SPACE["stitching"] = {
    "pairs": [{"front": "zoo:plain_a", "end": "zoo:plain_a"}],
    "stitch_points": ["layer2.0"],
    "objectives": ["adv", "adv_mix", "trades"],
    "alphas": [0.5, 1.0],
    "betas": [1.0],
    "epochs": 1,
    "lr": 0.01,
    "batch_size": 64,
    "adv_steps": 2,
}


@pytest.fixture
def robust_space():
    return copy.deepcopy(ROBUST_SPACE)


def test_adversarial_fields_are_recorded_per_objective(robust_space):
    trials = parse_space(robust_space).trials
    assert sorted((t.objective, t.alpha, t.beta) for t in trials) == [
        ("adv", 0.5, None),
        ("adv", 1.0, None),
        ("adv_mix", 0.5, None),
        ("adv_mix", 1.0, None),
        ("trades", None, 1.0),
    ]
    adv = next(t for t in trials if t.objective == "adv")
    assert (adv.adv_eps, adv.adv_step_size, adv.adv_steps, adv.adv_random_start) == (0.3, 0.1, 2, True)
    assert next(t for t in trials if t.objective == "adv_mix").adv_random_start is False  # as their code


def test_paper_threat_defaults_follow_the_dataset(robust_space):
    del robust_space["evaluation"]["eps"]
    t = parse_space(robust_space).trials[0]
    assert (t.eps, t.adv_eps, t.adv_step_size) == (0.3, 0.3, 0.1)  # A.3 for the MNIST family
    robust_space["stitching"]["adv_eps"] = 0.15  # a different eps keeps the paper's eps/step ratio
    assert parse_space(robust_space).trials[0].adv_step_size == pytest.approx(0.05)


BAD = [
    ("stitching.alphas", [0.5, 1.5], "stitching.alphas[1]", "1.5"),
    ("stitching.alphas", [-0.1], "stitching.alphas[0]", "-0.1"),
    ("stitching.betas", [-1], "stitching.betas[0]", "-1"),
    ("stitching.adv_eps", -0.1, "stitching.adv_eps", "-0.1"),
    ("evaluation.eps", -0.1, "evaluation.eps", "-0.1"),
    ("stitching.init", "zeros", "stitching.init", "zeros"),
    ("stitching.stitcher", "bn", "stitching.stitcher", "bn"),
    ("donors.plain_a.beta", 10, "donors.plain_a.beta", "training: trades"),
    ("donors.plain_a.data", {"dataset": "imagenet21k"}, "donors.plain_a.data.dataset", "imagenet21k"),
    (
        "stitching.pairs",
        [{"front": "zoo:plain_a", "end": "zoo:plain_a", "data": "middle"}],
        "stitching.pairs[0].data",
        "middle",
    ),
]


@pytest.mark.parametrize("path,value,field,found", BAD, ids=[f"{b[0]}={b[1]}" for b in BAD])
def test_bad_robust_input_names_the_field(robust_space, path, value, field, found):
    node = robust_space
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    with pytest.raises(SpecError) as err:
        parse_space(robust_space)
    assert str(err.value).startswith(field + ":"), str(err.value)
    assert found in str(err.value)


def test_an_option_of_an_objective_not_chosen_is_refused(robust_space):
    robust_space["stitching"]["objectives"] = ["tlm", "trades"]
    with pytest.raises(SpecError, match=r"^stitching.alphas: .*applies to objectives \['adv', 'adv_mix'\]"):
        parse_space(robust_space)
    robust_space["stitching"]["objectives"] = ["tlm"]
    del robust_space["stitching"]["alphas"]
    with pytest.raises(SpecError, match=r"^stitching.betas: .*\['trades'\]"):
        parse_space(robust_space)


def test_cross_task_pairs_need_one_input_shape(robust_space):
    robust_space["donors"]["cifar"] = {"arch": "resnet_tiny", "epochs": 1, "data": {"dataset": "cifar10"}}
    robust_space["stitching"]["pairs"] = [{"front": "zoo:cifar", "end": "zoo:plain_a"}]
    with pytest.raises(SpecError, match=r"^stitching.pairs\[0\]: .*one input shape"):
        parse_space(robust_space)


def test_stitching_blocks_and_cross_task_data_roles():
    space = copy.deepcopy(TINY_SPACE)
    space["data"] = {"dataset": "fashion_mnist", "train_size": 500, "val_size": 100, "test_size": 200}
    space["donors"]["digits_a"] = {
        "arch": "resnet_tiny",
        "epochs": 1,
        "lr": 0.1,
        "data": {"dataset": "digits", "val_size": 200},
    }
    space["stitching"] = [
        {
            "pairs": [{"front": "zoo:plain_a", "end": "zoo:digits_a", "data": ["front", "end"]}],
            "objectives": ["tlm"],
            "epochs": 1,
        },
        {
            "pairs": [{"front": "zoo:plain_a", "end": "zoo:plain_a"}],
            "stitch_points": ["layer1.0"],
            "objectives": ["trades"],
            "betas": [1.0, 6.0],
            "epochs": 1,
        },
    ]
    sweep = parse_space(space)
    cross = [t for t in sweep.trials if t.end == "zoo:digits_a"]
    assert len(cross) == 2 * 6 and {t.stitch_data for t in cross} == {"front", "end"}
    on_end = next(t for t in cross if t.stitch_data == "end")
    assert (on_end.dataset, on_end.train_size, on_end.val_size) == ("digits", None, 200)
    assert (on_end.front_dataset, on_end.end_dataset) == ("fashion_mnist", "digits")
    on_front = next(t for t in cross if t.stitch_data == "front")
    assert (on_front.dataset, on_front.train_size) == ("fashion_mnist", 500)
    assert sorted(t.beta for t in sweep.trials if t.objective == "trades") == [1.0, 6.0]
    assert sweep.donors["digits_a"].data.dataset == "digits"
    assert sweep.donors["digits_a"].donor_key != parse_space(TINY_SPACE).donors["plain_a"].donor_key


# ---------------------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def robust_zoo(tmp_path_factory):
    """A plain and a TRADES donor on the digits (tiny), trained once for this module."""
    space = copy.deepcopy(ROBUST_SPACE)
    space["donors"]["trades_a"] = {
        "arch": "resnet_tiny",
        "training": "trades",
        "epochs": 1,
        "lr": 0.1,
        "steps": 2,
        "seed": 0,
    }
    space["stitching"]["pairs"] = [{"front": "zoo:trades_a", "end": "zoo:plain_a"}]
    space["evaluation"]["n_eval_robust"] = 16
    sweep = parse_space(space)
    root = tmp_path_factory.mktemp("results")
    sweep_dir = SweepDir(root, sweep.name)
    sweep_dir.create()
    for donor in sweep.donors.values():
        row = run_donor(donor, sweep.donor_evals[donor.name], sweep_dir, torch.device("cpu"))
        assert row["status"] == "done", row.get("error")
    return sweep, sweep_dir


@pytest.mark.slow
def test_trades_donor_is_trained_and_recorded(robust_zoo):
    import analysis

    donors = analysis.load(robust_zoo[1].path)["donors"].set_index("donor")
    assert donors.loc["trades_a", "training"] == "trades" and donors.loc["trades_a", "beta"] == 10.0
    assert donors.loc["plain_a", "training"] == "plain"


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["adv", "adv_mix", "trades"])
def test_adversarial_objectives_run_end_to_end_and_record_their_settings(robust_zoo, objective):
    sweep, sweep_dir = robust_zoo
    spec = next(t for t in sweep.trials if t.objective == objective)
    row = run_trial(spec, sweep_dir)
    assert row["status"] == "done", row.get("error")
    assert row["adv_eps"] == 0.3 and row["adv_steps"] == 2
    assert (row["alpha"] is None) == (objective == "trades") and (row["beta"] is None) == (objective != "trades")
    # the robust accuracy is a count over the n_eval_robust attacked images
    assert row["robust_acc"] * 16 == round(row["robust_acc"] * 16) and row["n_eval_robust"] == 16
    # the adversarial term is really in the loss: the same stitcher set-up trained by task loss alone ends
    # with a lower training loss than the adversarial objective (PGD at eps 0.3 on the digits is strong)
    tlm = dataclasses.replace(
        spec,
        objective="tlm",
        alpha=None,
        beta=None,
        adv_eps=None,
        adv_step_size=None,
        adv_steps=None,
        adv_random_start=None,
        n_eval_robust=0,
    )
    run_trial(tlm, sweep_dir)  # once for the three objectives: later calls find it recorded
    base = sweep_dir.trial_part(tlm.trial_id).read_parquet().to_pylist()[0]
    assert base["status"] == "done" and row["final_train_loss"] > base["final_train_loss"] + 0.05


@pytest.mark.slow
@pytest.mark.parametrize("stitcher,init", [("bn_affine_bn", "random"), ("affine", "dm"), ("bn_affine_bn", "dm")])
def test_stitcher_options_run_and_are_part_of_the_identity(robust_zoo, stitcher, init):
    sweep, sweep_dir = robust_zoo
    base = next(t for t in sweep.trials if t.objective == "adv" and t.alpha == 0.5)
    spec = dataclasses.replace(
        base,
        objective="tlm",
        alpha=None,
        adv_eps=None,
        adv_step_size=None,
        adv_steps=None,
        adv_random_start=None,
        stitcher=stitcher,
        init=init,
        dm_samples=100 if init == "dm" else None,
    )
    assert (
        spec.trial_id
        != dataclasses.replace(spec, stitcher="affine" if stitcher != "affine" else "bn_affine_bn").trial_id
    )
    row = run_trial(spec, sweep_dir)
    assert row["status"] == "done", row.get("error")
    assert row["stitcher"] == stitcher and row["init"] == init
    assert (row.get("dm_residual") is not None) == (init == "dm")
    assert row["clean_acc"] > 0.3  # one epoch on the digits: better than chance by far


@pytest.mark.slow
def test_cross_task_trials_run_on_either_donors_data(tmp_path):
    space = copy.deepcopy(TINY_SPACE)
    space["data"] = {"dataset": "fashion_mnist", "train_size": 600, "val_size": 100, "test_size": 300}
    space["donors"]["digits_a"] = {
        "arch": "resnet_tiny",
        "epochs": 2,
        "lr": 0.1,
        "data": {"dataset": "digits", "val_size": 200},
    }
    space["stitching"] = {
        "pairs": [{"front": "zoo:plain_a", "end": "zoo:digits_a", "data": ["front", "end"]}],
        "stitch_points": ["layer3.1"],
        "objectives": ["tlm"],
        "epochs": 1,
        "lr": 0.01,
    }
    space["evaluation"]["n_eval_robust"] = 0
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    donors = {
        d.name: run_donor(d, sweep.donor_evals[d.name], sweep_dir, torch.device("cpu")) for d in sweep.donors.values()
    }
    assert all(r["status"] == "done" for r in donors.values())
    rows = {t.stitch_data: run_trial(t, sweep_dir) for t in sweep.trials}
    assert all(r["status"] == "done" for r in rows.values()), rows
    front, end = rows["front"], rows["end"]
    assert (front["dataset"], front["test_size"], end["dataset"], end["test_size"]) == (
        "fashion_mnist",
        300,
        "digits",
        359,
    )
    assert (front["front_dataset"], front["end_dataset"]) == ("fashion_mnist", "digits")
    # relative to the donor trained on the data the stitched network is tested on
    assert front["relative_acc"] == pytest.approx(front["clean_acc"] / donors["plain_a"]["clean_acc"])
    assert end["relative_acc"] == pytest.approx(end["clean_acc"] / donors["digits_a"]["clean_acc"])


@pytest.mark.parametrize("iterations", [20, 100, 7])
def test_autoattack_step_size_schedule_follows_the_configured_iterations(iterations):
    """pyautoattack's APGD fixes its step-size checkpoints in __init__ from n_iter (Croce & Hein 2020: the
    first check after 22% of the iterations, then shrinking by 3% down to 6%). Built for 100 and then set
    to 20, the step size never halves: the checkpoints must come from the configured budget."""
    from sweep.train.attacks import build_autoattack

    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 3))
    adversary = build_autoattack(
        model, eps=0.1, attacks=("apgd-ce", "apgd-dlr"), iterations=iterations, restarts=2, seed=0, device="cpu"
    )
    for attack in (adversary.apgd, adversary.apgd_targeted):
        assert attack.n_iter == attack.n_iter_orig == iterations and attack.n_restarts == 2
        assert attack.n_iter_2 == max(int(0.22 * iterations), 1)
        assert attack.n_iter_min == max(int(0.06 * iterations), 1)
        assert attack.size_decr == max(int(0.03 * iterations), 1)
        assert attack.eps == 0.1 and attack.norm == "Linf" and attack.seed == 0


def test_autoattack_standard_is_its_own_version_and_the_components_run_with_the_budget():
    """`standard` alone is AutoAttack's standard version (APGD-CE, APGD-T, FAB-T, Square, 100 iterations: Balogh &
    Jelasity 2023 Table 2's right column); the components named one by one get the configured budget. On a
    linear model a robust point stays robust under every attack: accuracy can only fall from clean."""
    from sweep.config.evaluation import parse_evaluation
    from sweep.train.attacks import autoattack_accuracy, build_autoattack

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 10)).eval()  # targeted DLR needs 4+ classes
    standard = build_autoattack(model, eps=0.1, attacks=("standard",), iterations=20, restarts=1, seed=0, device="cpu")
    assert standard.version == "standard" and standard.attacks_to_run == ["apgd-ce", "apgd-t", "fab-t", "square"]
    assert standard.apgd.n_iter == 100
    custom = ("apgd-ce", "apgd-t", "fab-t", "square")
    mine = build_autoattack(model, eps=0.1, attacks=custom, iterations=7, restarts=1, seed=0, device="cpu")
    assert mine.attacks_to_run == list(custom) and mine.apgd_targeted.n_iter == 7
    x, y = torch.rand(6, 1, 2, 2), torch.randint(0, 10, (6,))
    clean = (model(x).argmax(1) == y).float().mean().item()
    assert autoattack_accuracy(model, x, y, eps=0.05, attacks=("standard",)) <= clean
    with pytest.raises(SpecError, match="standard alone"):
        parse_evaluation({"attacks": ["standard", "apgd-ce"]}, 0.3, 100)


def test_a_donors_only_space_evaluates_every_donor_with_its_datasets_eps():
    """Balogh & Jelasity 2023 Table 1: a space with donors and no other section trains and evaluates them all,
    each under its own dataset's threat model unless `evaluation.eps` is given."""
    from sweep.config.space import parse_space

    space = {
        "name": "table1",
        "data": {"dataset": "cifar10"},  # download on: nothing is fetched while a space is read
        "donors": {
            "c": {"arch": "resnet_tiny", "epochs": 1},
            "m": {"arch": "resnet_tiny", "epochs": 1, "data": {"dataset": "digits"}},
        },
        "evaluation": {"n_eval_robust": 100},
    }
    sweep = parse_space(space)
    assert set(sweep.donors) == {"c", "m"} and not sweep.trials
    eps = {name: evs[0].eps for name, evs in sweep.donor_evals.items()}
    assert eps == {"c": pytest.approx(8 / 255), "m": 0.3}
    given = parse_space({**space, "evaluation": {"eps": 0.1, "n_eval_robust": 100}})
    assert {evs[0].eps for evs in given.donor_evals.values()} == {0.1}
