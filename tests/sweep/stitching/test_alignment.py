"""Soft-label matching (`slm`) and our reading of functional latent alignment (`fula`): their losses against
direct formulations written here, their fits on a small trained net, and `plan`'s refusals of bad options."""

import copy

import pytest
import torch
from torch import nn

from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.data.core import make_splits
from sweep.models.base import build, split
from sweep.stitching.alignment import latent_alignment_loss, soft_label_loss, through
from sweep.stitching.objectives import OBJECTIVES, FitContext, direct_match
from sweep.stitching.stitcher import Stitcher
from sweep.train.evaluate import accuracy, predict
from tests.conftest import TINY_SPACE

POINT = "layer2.0"


@pytest.fixture(scope="module")
def trained():
    """resnet_tiny trained a few epochs on 400 digits: a donor whose predictions mean something."""
    splits = make_splits("digits", 400, 200, None)
    torch.manual_seed(0)
    net = build("resnet_tiny", 1, 10, (0.1,), (0.25,), image_size=28)
    opt = torch.optim.Adam(net.parameters(), 3e-3)
    gen = torch.Generator().manual_seed(0)
    for _ in range(6):
        for idx in torch.randperm(len(splits.train_y), generator=gen).split(50):
            opt.zero_grad()
            nn.functional.cross_entropy(net(splits.train_x[idx]), splits.train_y[idx]).backward()
            opt.step()
    return net.eval(), splits


def _ctx(net, splits, objective, params=(), epochs=4, point=POINT):
    front, end = split(net, point)
    end_front, _ = split(net, point)
    with torch.no_grad():
        shape = front(splits.train_x[:2]).shape
    fields = dict(
        epochs=epochs, lr=0.01, batch_size=50, init="random", donor_bn="frozen", seed=1, stitcher="affine",
        objective=objective, precision="fp32", channels_last=False, optimizer="adam", weight_decay=0.0,
        momentum=None, lr_schedule="constant", params=tuple(params), end_point=point, dm_samples=None,
    )  # fmt: skip
    spec = type("Spec", (), fields)()
    torch.manual_seed(5)
    stitcher = Stitcher.for_shapes(shape, shape, "random", "affine")
    ctx = FitContext(front, end, stitcher, splits, spec, torch.device("cpu"), end_front)
    ctx.end_model = net
    return ctx


def test_soft_label_loss_is_t2_kl_and_zero_at_the_teacher():
    z, t = torch.randn(8, 10), torch.randn(8, 10)
    p, q = torch.softmax(t / 2, 1), torch.softmax(z / 2, 1)
    direct = 4 * (p * (p.log() - q.log())).sum(1).mean()
    assert torch.allclose(soft_label_loss(z, t, 2.0), direct, atol=1e-6)
    assert soft_label_loss(t, t, 1.0).abs() < 1e-6


def test_latent_alignment_loss_is_the_weighted_sum_of_energy_normalised_errors():
    gen = torch.Generator().manual_seed(0)
    s = [torch.randn(6, 3, 4, 4, generator=gen), torch.randn(6, 5, generator=gen)]
    t = [torch.randn(6, 3, 4, 4, generator=gen), 3 * torch.randn(6, 5, generator=gen)]
    w = [1.0, 3.0]
    direct = sum(
        wk / 4.0 * float(((sk - tk) ** 2).sum()) / float((tk**2).sum()) for sk, tk, wk in zip(s, t, w)
    )  # fmt: skip
    assert float(latent_alignment_loss(s, t, w)) == pytest.approx(direct, rel=1e-5)
    assert float(latent_alignment_loss(t, t, w)) == 0.0


def test_through_collects_each_hint_layer_in_one_pass(trained):
    net, splits = trained
    front, end = split(net, POINT)
    a = front(splits.test_x[:4])
    got = through(end, a, [0, 2, len(end)])
    assert torch.equal(got[0], a) and torch.allclose(got[1], end[1](end[0](a)))
    assert torch.allclose(got[-1], net(splits.test_x[:4]), atol=1e-5)


@pytest.mark.slow
def test_slm_from_random_init_on_a_self_stitch_reaches_relative_accuracy_one(trained):
    net, splits = trained
    ctx = _ctx(net, splits, "slm", (("temperature", 1.0),), epochs=8)
    OBJECTIVES["slm"].fit(ctx)
    losses = [v for _, m, v in ctx.curves if m == "train_loss"]
    assert losses[-1] < 0.5 * losses[0]
    ref = accuracy(predict(net, splits.test_x, ctx.device), splits.test_y)
    got = accuracy(predict(ctx.stitched, splits.test_x, ctx.device), splits.test_y)
    assert ref > 0.5 and got / ref == pytest.approx(1.0, abs=0.08)


def _matching_loss(ctx) -> float:
    """||T(A) - B||^2 / ||B||^2 over the training images at the stitch point."""
    with torch.no_grad():
        a, b = ctx.front(ctx.splits.train_x), ctx.end_front(ctx.splits.train_x)
        return float(((ctx.stitcher.eval()(a) - b) ** 2).sum() / (b**2).sum())


@pytest.mark.slow
def test_fula_with_the_stitch_point_as_its_one_hint_reaches_the_dm_solution(trained):
    net, splits = trained
    dm = _ctx(net, splits, "dm")
    direct_match(dm)
    params = (("fula_layers", (POINT,)), ("fula_weights", (1.0,)))
    fula = _ctx(net, splits, "fula", params, epochs=10)
    fula.spec.lr = 0.05
    OBJECTIVES["fula"].fit(fula)
    best, got = _matching_loss(dm), _matching_loss(fula)
    assert best <= got + 1e-6 and got < best + 0.02, (best, got)


def test_fula_trains_through_every_hint_layer_by_default(trained):
    net, splits = trained
    params = (("fula_layers", ("all",)), ("fula_weights", (1.0,)))
    ctx = _ctx(net, splits, "fula", params, epochs=2)
    from sweep.stitching.alignment import hint_counts

    layers, counts = hint_counts(ctx)
    assert layers[0] == POINT and counts[0] == 0 and layers == [POINT, *net.stitch_points[3:]]
    OBJECTIVES["fula"].fit(ctx)
    losses = [v for _, m, v in ctx.curves if m == "train_loss"]
    assert losses[-1] < losses[0]


def test_fula_reads_its_hint_layers_from_the_worker_cache_shared_by_trials_into_the_same_end(trained, tmp_path):
    """With the cache on, fula's hint-layer targets are the end donor's frozen halves g<=k (one entry per k):
    a second trial into the same end network computes none of them again, and the fit matches the per-batch
    targets' fit (the same activations up to the chunk grid's rounding: the first epochs' losses agree to 1e-4)."""
    from sweep.worker import cache
    from sweep.worker.activations import Frozen

    net, splits = trained
    net.checkpoint_identity = ("tiny", "ckpt")
    params = (("fula_layers", ("all",)), ("fula_weights", (1.0,)))
    try:
        c = cache.configure({cache.DIR_ENV: str(tmp_path / "node")})
        curves = []
        for _ in range(2):
            ctx = _ctx(net, splits, "fula", params, epochs=2)
            ctx.front_acts = Frozen(ctx.front, ("tiny", "ckpt", POINT), splits, ctx.device)
            ctx.end_acts = Frozen(ctx.end_front, ("tiny", "ckpt", POINT), splits, ctx.device)
            misses = c.stats.misses
            OBJECTIVES["fula"].fit(ctx)
            curves.append([v for _, m, v in ctx.curves if m == "train_loss"])
        assert c.stats.misses == misses  # the second trial: every hint layer (and the fronts) from the cache
        from sweep.stitching.alignment import hint_counts

        layers, _ = hint_counts(ctx)
        kept = {key[3] for key in c._entries if key[0] == "activations" and key[5] == "train"}
        assert set(layers) <= kept and len(layers) > 2
    finally:
        cache.configure()
    per_batch = _ctx(net, splits, "fula", params, epochs=2)
    OBJECTIVES["fula"].fit(per_batch)
    reference = [v for _, m, v in per_batch.curves if m == "train_loss"]
    assert curves[0] == pytest.approx(curves[1], rel=1e-6)
    assert curves[0] == pytest.approx(reference, rel=1e-4), (curves[0], reference)


def _space(**block):
    space = copy.deepcopy(TINY_SPACE)
    del space["stitching"]["dm_samples"]
    space["stitching"].update(block)
    return space


@pytest.mark.parametrize(
    "option, value, says",
    [
        ("fula_layers", ["layer1.0"], "at or after the stitch point"),
        ("fula_layers", ["layer9.9"], "'all' or points of"),
        ("fula_weights", [1.0, -1.0], ">= 0.0"),
        ("fula_weights", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], "one per hint layer"),
    ],
)
def test_plan_refuses_bad_fula_options_in_one_line(option, value, says):
    space = _space(objectives=["fula"], stitch_points=[POINT], **{option: value})
    with pytest.raises(SpecError, match=says) as err:
        parse_space(space)
    assert "\n" not in str(err.value) and option in str(err.value)


def test_slm_and_fula_plan_with_their_defaults_recorded():
    sweep = parse_space(_space(objectives=["slm", "fula"], stitch_points=[POINT]))
    params = {t.objective: dict(t.params) for t in sweep.trials}
    assert params == {"slm": {"temperature": 1.0}, "fula": {"fula_layers": ("all",), "fula_weights": (1.0,)}}
