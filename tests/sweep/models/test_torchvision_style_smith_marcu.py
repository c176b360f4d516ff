"""Smith & Marcu 2024's networks and stitch points: torchvision's ResNet-18 and VGG-19 cut *before* named
modules, with the shapes the paper states, and the linear stitcher that vector points (the pooled features
before a classifier) need."""

import copy

import numpy as np
import pytest
import torch

from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.models.base import ARCHITECTURES, build, split
from sweep.stitching.stitcher import StitchedNet, Stitcher


def test_resnet18_tv_points_are_before_its_stages_and_classifier_with_the_papers_shapes():
    arch = ARCHITECTURES["resnet18_tv"]
    assert arch.stitch_points() == ["before_layer1", "before_layer2", "before_layer3", "before_layer4", "before_fc"]
    shapes = arch.activation_shapes(3, 28)
    assert shapes["before_layer2"] == (64, 7, 7)  # Section 2: 64 x 7 x 7 before layer 2 on 28 x 28 input
    assert shapes["before_fc"] == (512,)  # a vector: the linear stitcher's point
    torch.manual_seed(0)
    model = build("resnet18_tv", 3, 10, (0.5,), (0.5,), 28).eval()
    x = torch.rand(3, 3, 28, 28)
    for point in arch.stitch_points():
        front, end = split(model, point)
        torch.testing.assert_close(end(front(x)), model(x))
    # the cut before the classifier is the input of its linear layer: post-ReLU, pooled
    front, _ = split(model, "before_fc")
    assert (front(x) >= 0).all() and torch.allclose(model.stage("fc")(front(x)), model(x))


def test_vgg19_tv_has_torchvisions_indices_and_pads_28_pixels_to_32():
    arch = ARCHITECTURES["vgg19_tv"]
    shapes = arch.activation_shapes(3, 28)
    assert shapes["before_features.2"] == (64, 32, 32)  # C.2: 64 maps of 32 x 32 at features.2
    assert shapes["before_features.10"] == (128, 8, 8) and shapes["before_features.30"] == (512, 2, 2)
    assert shapes == arch.activation_shapes(3, 32)  # 28 x 28 input is padded, not resized
    model = build("vgg19_tv", 3, 10, (0.5,), (0.5,), 28)
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 16 and not any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())


def test_vgg19_tv_code_cuts_and_resizes_as_the_authors_notebook():
    """The notebook's `RcvVGG19(model, k)` receives after `features.k` for k in [1, 8, 22, 29, 35], its inputs
    resized to 32 px by torchvision's `Resize` (bilinear). torchvision's own VGG-19 from the same seed, fed through
    `Resize` and cut with `features[: k + 1]`, gives our front's activations; the stitched end, their logits."""
    import torchvision
    from torchvision.transforms import Resize

    arch = ARCHITECTURES["vgg19_tv_code"]
    assert arch.activation_shapes(3, 28)["before_features.36"] == (512, 2, 2)  # 512 x 2 x 2
    assert arch.activation_shapes(3, 28)["before_features.9"] == (128, 16, 16)  # before the second max-pool
    torch.manual_seed(5)
    ours = build("vgg19_tv_code", 3, 10, (0.0,), (1.0,), image_size=28).eval()
    torch.manual_seed(5)
    theirs = torchvision.models.vgg19(weights=None, num_classes=10).eval()
    x = torch.rand(4, 3, 28, 28, generator=torch.Generator().manual_seed(1))
    resized = Resize(32, antialias=True)(x)
    with torch.no_grad():
        for k, point in zip([1, 8, 22, 29, 35], arch.stitch_points(), strict=True):
            front, end = split(ours, point)
            torch.testing.assert_close(front(x), theirs.features[: k + 1](resized), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(ours(x), theirs(resized), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("arch,reference", [("vgg19_tv", "vgg19"), ("resnet18_tv", "resnet18")])
def test_torchvision_style_networks_start_from_torchvisions_own_initialisation(arch, reference):
    """Smith & Marcu train `torchvision.models.vgg19(weights=None)` / `resnet18(weights=None)`: from the same seed
    our network draws the same initial weights in the same order (parameters equal: the CPU generator's draws,
    exact on any machine), so it computes torchvision's logits. With PyTorch's default init VGG-19's logits barely
    moved across inputs (spread ~2e-9): torchvision's spread them ~5e-4 apart."""
    import torchvision

    torch.manual_seed(3)
    ours = build(arch, 3, 10, (0.0,), (1.0,), image_size=32).eval()
    torch.manual_seed(3)
    theirs = getattr(torchvision.models, reference)(weights=None, num_classes=10).eval()
    mine, ref = list(ours.parameters()), list(theirs.parameters())
    assert len(mine) == len(ref) and all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(mine, ref))
    x = torch.rand(32, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = ours(x)
        assert torch.allclose(logits, theirs(x), rtol=1e-4, atol=1e-6)
    assert logits.std(0).mean() > 1e-4  # the logits depend on the input


def test_vector_stitcher_is_linear_and_identity_init_reproduces_the_network():
    torch.manual_seed(0)
    model = build("resnet18_tv", 3, 10, (0.5,), (0.5,), 28).eval()
    front, end = split(model, "before_fc")
    x = torch.rand(5, 3, 28, 28)
    with torch.no_grad():
        a = front(x)
    stitcher = Stitcher.for_shapes(a.shape, a.shape, init="identity")
    assert isinstance(stitcher.map, torch.nn.Linear) and stitcher.channels == (512, 512)
    torch.testing.assert_close(StitchedNet(front, stitcher, end)(x), model(x))
    bn = Stitcher.for_shapes(a.shape, torch.Size([5, 256]), kind="bn_affine_bn").eval()
    assert isinstance(bn.bn_in, torch.nn.BatchNorm1d) and bn(a).shape == (5, 256)


def test_direct_matching_on_vectors_recovers_an_exact_affine_map():
    """Targets that are an affine map of the sources: the least-squares stitcher finds that map (checked
    against numpy's lstsq, a second formulation)."""
    from types import SimpleNamespace

    from sweep.stitching.objectives import FitContext, direct_match

    rng = np.random.default_rng(0)
    w, b = rng.normal(size=(6, 4)), rng.normal(size=4)
    src = torch.tensor(rng.normal(size=(40, 6)), dtype=torch.float32)
    front = torch.nn.Identity()
    end_front = torch.nn.Linear(6, 4).double()
    with torch.no_grad():
        end_front.weight.copy_(torch.tensor(w.T))
        end_front.bias.copy_(torch.tensor(b))
    end_front = end_front.float()
    stitcher = Stitcher.for_shapes(torch.Size([1, 6]), torch.Size([1, 4]))
    splits = SimpleNamespace(train_x=src)
    spec = SimpleNamespace(dm_samples=40)
    ctx = FitContext(front=front, end=torch.nn.Identity(), stitcher=stitcher, splits=splits, spec=spec,
                     device=torch.device("cpu"), end_front=end_front)  # fmt: skip
    residual = direct_match(ctx)
    assert residual["dm_residual"] < 1e-5
    solved, *_ = np.linalg.lstsq(np.c_[src.numpy(), np.ones(40)], src.numpy() @ w + b, rcond=None)
    np.testing.assert_allclose(stitcher.map.weight.detach().numpy().T, solved[:6], atol=1e-4)
    np.testing.assert_allclose(stitcher.map.bias.detach().numpy(), solved[6], atol=1e-4)


@pytest.mark.parametrize("shape", [(4, 512), (4, 64, 7, 7)])
def test_positions_of_vectors_are_the_vectors(shape):
    from sweep.config.shapes import positions as rows_per_image
    from sweep.stitching.stitcher import positions

    a = torch.rand(shape)
    assert positions(a).shape == ((4, 512) if len(shape) == 2 else (4 * 49, 64))
    assert rows_per_image(shape[1:]) == (1 if len(shape) == 2 else 49)


def test_noise_samples_follow_algorithms_1_and_2():
    """Per class a base activation in [0, 1); samples are the base plus sigma N(0, 1), clamped to [0, 1]:
    shape, range, counts and class structure (the class mean is the base, up to the clamp)."""
    from sweep.stitching.noise import noise_splits

    s = noise_splits((4, 3, 3), 10, 0.05, 200, 100, 50, seed=1)
    assert s.train_x.shape == (2000, 4, 3, 3) and s.test_x.shape == (1000, 4, 3, 3) and len(s.val_y) == 50
    assert torch.equal(torch.bincount(s.train_y), torch.full((10,), 200))
    train, test = s.train_x[:], s.test_x[:]  # the whole parts, drawn
    assert train.min() >= 0 and train.max() <= 1
    means = torch.stack([train[s.train_y == c].mean(0) for c in range(10)])
    test_means = torch.stack([test[s.test_y == c].mean(0) for c in range(10)])
    assert (means - test_means).abs().max() < 0.03  # one base per class, shared by train and test
    spread = (train - means[s.train_y]).std()
    assert 0.03 < spread < 0.05  # sigma, a little less where the clamp bites
    gap = torch.cdist(means.flatten(1), means.flatten(1))
    assert gap[~torch.eye(10, dtype=bool)].min() > 0.5  # random bases: clusters far apart
    # the classes in turns: the first N samples of a split (what a receiver rank or a DM fit reads) hold every
    # class, N // 10 of each (class-ordered samples gave a rank measured on class 0 alone)
    assert torch.equal(torch.bincount(s.test_y[:100], minlength=10), torch.full((10,), 10))
    assert torch.equal(torch.bincount(s.train_y[:30], minlength=10), torch.full((10,), 3))
    again = noise_splits((4, 3, 3), 10, 0.05, 200, 30, 50, seed=1)
    assert torch.equal(train, again.train_x[:])
    assert not torch.equal(train, noise_splits((4, 3, 3), 10, 0.05, 200, 30, 50, seed=2).train_x[:])
    # every sample its own draw: no two noise vectors of the three parts alike (one seed reused would repeat one)
    z = torch.cat([train, s.val_x[:], test]) - torch.cat([means[s.train_y], means[s.val_y], means[s.test_y]])
    assert len(torch.unique(z.flatten(1)[:, :3], dim=0)) == len(z)


@pytest.mark.slow  # about 33 s of CPU on a 2-core x86-64 CPU (2026-11-29)
def test_noise_batches_are_drawn_when_read_and_are_the_same_samples_held_or_not():
    """A part is drawn per batch, in any order, with nothing held (a part of a billion samples is indexed at
    once); a part within `keep_bytes` is held as a tensor of exactly the same samples."""
    from sweep.data.core import batches
    from sweep.stitching.noise import NoiseSamples, noise_splits

    lazy = noise_splits((2, 5, 5), 3, 0.2, 40, 10, 6, seed=7)
    held = noise_splits((2, 5, 5), 3, 0.2, 40, 10, 6, seed=7, keep_bytes=40 * 3 * 50 * 4)
    assert isinstance(lazy.train_x, NoiseSamples) and isinstance(held.train_x, torch.Tensor)
    assert isinstance(held.test_x, torch.Tensor) and isinstance(held.val_x, torch.Tensor)
    whole = held.train_x
    gen = torch.Generator().manual_seed(0)
    seen = torch.zeros(len(whole), dtype=torch.long)
    for xb, yb in batches(lazy.train_x, lazy.train_y, 16, gen):  # shuffled batches, as a fit reads them
        rows = (xb.flatten(1)[:, None] == whole.flatten(1)[None]).all(-1).nonzero()
        assert len(rows) == len(xb)  # each drawn sample is one held sample
        assert torch.equal(lazy.train_y[rows[:, 1]], yb)
        seen[rows[:, 1]] += 1
    assert torch.equal(seen, torch.ones_like(seen))
    assert torch.equal(lazy.test_x[3], held.test_x[3]) and torch.equal(lazy.val_x[-2:], held.val_x[-2:])
    assert torch.equal(lazy.train_x[lazy.train_y == 1], whole[held.train_y == 1])
    huge = NoiseSamples(torch.rand(3, 64, 28, 28), 0.1, 10**9, first=5)  # 200 TB if it were held
    far = huge[torch.tensor([0, 10**9 - 1])]
    assert far.shape == (2, 64, 28, 28) and 0 <= far.min() and far.max() <= 1
    assert torch.equal(huge[10**9 - 1], far[1])


@pytest.fixture(scope="module")
def digits_receiver(tmp_path_factory):
    """A tiny receiver trained on the digits, and a space whose noise sender stitches into it."""
    import copy

    from sweep.config.space import parse_space
    from sweep.kinds.donor.run import run_donor
    from sweep.store.results import SweepDir
    from tests.conftest import TINY_SPACE

    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["noise"] = {"noise": {"sigma": 0.1, "train_per_class": 60, "test_per_class": 40}}
    space["stitching"] = {
        "pairs": [{"front": "noise:noise", "end": "zoo:plain_a"}],
        "stitch_points": ["layer1.0", "layer3.1"],
        "objectives": ["tlm"],
        "stitcher": "bn_affine_bn",  # Bansal et al.'s, as the paper
        "epochs": 8,
        "lr": 0.01,
        "batch_size": 32,
        "lr_schedule": "constant",
        "indices": ["receiver_rank"],
        "similarity_samples": 100,
    }
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path_factory.mktemp("results"), sweep.name)
    sweep_dir.create()
    assert list(sweep.donor_evals) == ["plain_a"]  # the noise sender is never trained or evaluated
    row = run_donor(sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, torch.device("cpu"))
    assert row["status"] == "done"
    return space, sweep, sweep_dir


@pytest.mark.slow
def test_a_noise_sender_stitches_into_a_receiver_and_is_tested_on_its_own_samples(digits_receiver):
    from sweep.kinds.trial.run import run_trial

    _, sweep, sweep_dir = digits_receiver
    rows = [run_trial(t, sweep_dir, device=torch.device("cpu")) for t in sweep.trials]
    for row in rows:
        assert row["status"] == "done", row.get("error")
        assert row["noise_sigma"] == 0.1 and row["train_size"] == 600 and row["test_size"] == 400
        assert row["robust_acc"] is None and row["front_clean_acc"] is None
        assert row["end_clean_acc"] > 0.5  # the baseline: the receiver on its own test images
        # ten well-separated clusters: the receiver classifies them after the stitch (measured 0.785 / 1.0 at the two
        # points on the AVX-512 kernel path, 0.675 / 1.0 on AVX2: a margin of 0.17)
        assert row["clean_acc"] > 0.5
        assert row["rank_receiver"] >= 1 and row["rank_receiver_end"] >= 1


@pytest.mark.slow
def test_a_noise_trial_drawn_per_batch_records_the_row_of_one_that_holds_its_samples(
    digits_receiver, tmp_path, monkeypatch
):
    """With no memory budget the noise is drawn batch by batch as the fit and the evaluation read it; the
    samples are the same, so the row is (the same fit on the same machine)."""
    import shutil

    from sweep.kinds.trial.run import run_trial
    from sweep.store.results import SweepDir
    from sweep.worker.cache import worker_cache

    _, sweep, sweep_dir = digits_receiver
    spec, rows = sweep.trials[0], {}
    for budget in (2**30, 0):  # each in a copy of the results without the trials' parts
        copy = SweepDir(tmp_path / str(budget), sweep.name)  # with the zoo the results' root holds
        shutil.copytree(sweep_dir.root, copy.root, ignore=shutil.ignore_patterns("trials", "curves", "stitchers"))
        monkeypatch.setattr(worker_cache().settings, "budget", budget)
        rows[budget] = run_trial(spec, copy, device=torch.device("cpu"))
    held, drawn = rows[2**30], rows[0]
    assert drawn["status"] == "done" and held["status"] == "done", (drawn.get("error"), held.get("error"))
    assert drawn["clean_acc"] == held["clean_acc"] and drawn["rank_receiver"] == held["rank_receiver"]
    assert drawn["final_train_loss"] == pytest.approx(held["final_train_loss"], rel=1e-6)


@pytest.mark.slow
def test_the_report_draws_accuracy_and_rank_by_sender(digits_receiver, tmp_path):
    from analysis.report.write import write_report
    from sweep.kinds.trial.run import run_trial

    _, sweep, sweep_dir = digits_receiver
    for t in sweep.trials:
        run_trial(t, sweep_dir, device=torch.device("cpu"))  # done already when run after the test above
    page = write_report(sweep_dir.path, tmp_path / "report").read_text()
    assert "Receiver rank after the stitch" in page
    # one sender and one receiver: the accuracy-by-sender chart is left out of the sweep's report (its stitching
    # plots say it all); its rows are still there for a paper's page
    assert "Stitched accuracy by sender and receiver" not in page
    import analysis
    from analysis.charts import senders

    tables = analysis.load(sweep_dir.path)
    acc = senders.by_point(tables["trials"], tables["donors"])
    assert set(acc["sender"]) == {"noise"} and "whole" in set(acc["front_point"])
    assert (tmp_path / "report" / "receiver_rank.png").stat().st_size > 5_000


@pytest.mark.slow
def test_noise_senders_are_refused_where_they_have_no_images(digits_receiver):
    import copy

    from sweep.config.errors import SpecError
    from sweep.config.space import parse_space

    space, _, _ = digits_receiver
    for change, field in (
        ({"objectives": ["dm"]}, "stitching.objectives"),
        ({"indices": ["cka"]}, "stitching.indices"),
        ({"end_points": "all"}, "stitching.pairs[0]"),
        ({"pairs": [{"front": "zoo:plain_a", "end": "noise:noise"}]}, "stitching.pairs[0].end"),
    ):
        bad = copy.deepcopy(space)
        bad["stitching"].update(change)
        with pytest.raises(SpecError) as err:
            parse_space(bad)
        assert err.value.field == field


@pytest.mark.slow
def test_noise_into_a_receiver_trained_on_other_data_uses_the_receivers_accuracy_on_the_sweeps_images(tmp_path):
    """The receiver baseline is the receiver on the stitching data's images, whatever data it trained on."""
    import copy

    from sweep.config.space import parse_space
    from sweep.data.core import make_splits
    from sweep.kinds.donor.run import run_donor
    from sweep.kinds.trial.run import run_trial
    from sweep.store.results import SweepDir
    from sweep.train.evaluate import predict
    from sweep.worker.zoo import load_donor
    from tests.conftest import TINY_SPACE

    space = copy.deepcopy(TINY_SPACE)
    space["donors"] = {
        "fashion": {"arch": "resnet_tiny", "epochs": 1, "data": {"dataset": "fashion_mnist", "train_size": 300}},
        "noise": {"noise": {"sigma": 0.1, "train_per_class": 20, "test_per_class": 10}},
    }
    space["stitching"] = {
        "pairs": [{"front": "noise:noise", "end": "zoo:fashion"}],
        "stitch_points": ["layer3.1"],
        "objectives": ["tlm"],
        "epochs": 1,
        "indices": ["receiver_rank"],
        "similarity_samples": 50,
    }
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    run_donor(sweep.donors["fashion"], sweep.donor_evals["fashion"], sweep_dir, torch.device("cpu"))
    (trial,) = sweep.trials
    row = run_trial(trial, sweep_dir, device=torch.device("cpu"))
    assert row["status"] == "done", row.get("error")
    digits = make_splits(trial.dataset, trial.train_size, trial.val_size, trial.test_size)
    receiver = load_donor(sweep_dir, trial.end_key, torch.device("cpu"))
    on_digits = float((predict(receiver, digits.test_x, torch.device("cpu")) == digits.test_y).float().mean())
    assert row["receiver_acc"] == pytest.approx(on_digits)
    assert row["relative_acc"] == pytest.approx(row["clean_acc"] / on_digits)


def test_a_noise_sender_with_its_own_seed_keeps_its_samples_across_the_blocks_seeds():
    """Smith & Marcu C.2 tries several stitcher initialisations on one noise dataset and several noise datasets:
    `noise: {seed: N}` fixes the samples while a block's seeds vary the stitcher; without it the seeds vary both."""
    from sweep.kinds.trial.run import noise_draw_seed
    from tests.conftest import TINY_SPACE

    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["drawn"] = {"noise": {"train_per_class": 60, "test_per_class": 40}}
    space["donors"]["fixed"] = {"noise": {"train_per_class": 60, "test_per_class": 40, "seed": 5}}
    space["stitching"] = {
        "pairs": [{"front": "noise:drawn", "end": "zoo:plain_a"}, {"front": "noise:fixed", "end": "zoo:plain_a"}],
        "stitch_points": ["layer1.0", "layer3.1"],
        "objectives": ["tlm"],
        "seeds": [0, 1],
    }
    sweep = parse_space(space)
    assert sweep.donors["fixed"].donor_key != sweep.donors["drawn"].donor_key
    draws = {}
    for t in sweep.trials:
        draws.setdefault((t.front, t.front_point), {})[t.seed] = noise_draw_seed(t)
        assert t.noise_seed == (5 if t.front == "noise:fixed" else None)
    for (front, point), by_seed in draws.items():
        same = by_seed[0] == by_seed[1]
        assert same == (front == "noise:fixed"), (front, point)
    assert draws[("noise:fixed", "layer1.0")][0] != draws[("noise:fixed", "layer3.1")][0]  # per point, still
    with pytest.raises(SpecError, match=r"^donors.fixed.noise.seed: expected an integer >= 0"):
        space["donors"]["fixed"]["noise"]["seed"] = -1
        parse_space(space)
