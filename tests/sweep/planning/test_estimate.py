"""The cost model (`sweep.planning.estimate`, `stitchsweep plan --estimate`): its prices against the documented
formulas worked by hand on a made-up profile, the cache's one pass per front, refinement by recorded
timings, and the shipped profile covering the shipped spaces."""

import copy
import json
import math
from pathlib import Path

import pytest

from sweep.cli import main
from sweep.config.space import load_space, parse_space
from sweep.costs import pricer as pricing
from sweep.planning import estimate
from sweep.registry import KINDS
from tests.conftest import REPO, TINY_SPACE

# Made-up round numbers, so that every expected value below is worked out by hand.
PROFILE = {
    "name": "made-up",
    "hardware": "none",
    "device": "cpu",
    "unit_s": 0.5,
    "archs": {
        "resnet_tiny@1x28": {
            "forward_s": 0.01,
            "step_s": 0.03,
            "share": {
                "layer1.0": 0.1,
                "layer1.1": 0.2,
                "layer2.0": 0.4,
                "layer2.1": 0.5,
                "layer3.0": 0.8,
                "layer3.1": 0.9,
            },
        }
    },
}


def _space(**stitching):
    space = copy.deepcopy(TINY_SPACE)
    space["data"].update(train_size=1000, val_size=200, test_size=300)  # digits: 28 px, one channel
    space["stitching"].pop("dm_samples")
    space["stitching"].update(stitch_points=["layer2.0"], **stitching)
    space["evaluation"]["n_eval_robust"] = 0
    return parse_space(space)


def _trial_seconds(sweep, objective, cache=True):
    (spec,) = [t for t in sweep.trials if t.objective == objective]
    return estimate.estimate(sweep, {"trial": [spec.trial_id]}, PROFILE, cache=cache).seconds["trial"]


def test_dm_trial_price_is_the_documented_sum():
    sweep = _space(objectives=["dm"], dm_samples=100)
    # the cache computes what the trial reads, in chunks of 250 images through f<=layer2.0 (share 0.4) at
    # 0.01 s: the fit's K = 100 training images (one chunk; g<=layer2.0 is the same half of the same donor),
    # the evaluation's 300 test images; then the test images through g>layer2.0 (share 0.6)
    expected = 0.5 + 250 * 0.01 * 0.4 + 300 * 0.01 * 0.4 + 300 * 0.01 * 0.6
    assert _trial_seconds(sweep, "dm") == pytest.approx(expected)
    # without the cache: K images through each half, the test images through the front
    uncached = 0.5 + 100 * 0.01 * 0.4 * 2 + 300 * 0.01 * 0.6 + 300 * 0.01 * 0.4
    assert _trial_seconds(sweep, "dm", cache=False) == pytest.approx(uncached)


def test_the_cache_chunk_is_the_engines():
    from sweep.worker.activations import CHUNK

    assert pricing.CHUNK == CHUNK


def test_inversion_and_saliency_prices_are_the_documented_products():
    space = copy.deepcopy(TINY_SPACE)
    del space["stitching"]
    space["donors"]["plain_b"] = dict(space["donors"]["plain_a"], seed=1)
    space["inversions"] = {"donors": ["zoo:plain_a"], "point": "layer2.0", "steps": 9, "images": 20}
    space["similarity"] = {"measure": "saliency", "images": 50, "pairs": [{"a": "zoo:plain_a", "b": "zoo:plain_b"}]}
    sweep = parse_space(space)
    (inv,), (sal,) = sweep.units["inversion"], sweep.units["similarity"]
    est = estimate.estimate(sweep, {"inversion": [inv.unit_id], "similarity": [sal.unit_id]}, PROFILE)
    # 20 images x (9 steps + the last iterate's loss) training steps through f<=layer2.0 (share 0.4) at 0.03 s
    assert est.seconds["inversion"] == pytest.approx(0.5 + 20 * 10 * 0.03 * 0.4)
    # one input gradient (a step) per image and model
    assert est.seconds["similarity"] == pytest.approx(0.5 + 2 * 50 * 0.03)
    # AutoAttack on 10 images: its components, iterations x restarts steps each; `standard`, its own upper bound
    pricer = pricing.Pricer(PROFILE, set())
    assert pricing.attack_seconds(pricer, "resnet_tiny", "digits", 10, ("apgd-ce", "apgd-t"), 20, 2) == pytest.approx(
        10 * 2 * 20 * 2 * 0.03
    )
    assert pricing.attack_seconds(pricer, "resnet_tiny", "digits", 10, ("standard",), 20, 1) == pytest.approx(
        10 * 1900 * 0.03 + 10 * 5000 * 0.01
    )


def test_tlm_trial_price_scales_with_epochs_and_the_cache_saves_the_front_per_epoch():
    prices = {}
    for epochs in (1, 3):
        sweep = _space(objectives=["tlm"], epochs=epochs)
        prices[epochs] = (_trial_seconds(sweep, "tlm"), _trial_seconds(sweep, "tlm", cache=False))
    per_epoch_cached = 1000 * 0.03 * 0.6 + 200 * 0.01 * 0.6  # steps through g>j, validation forwards
    per_epoch_uncached = per_epoch_cached + (1000 + 200) * 0.01 * 0.4
    assert prices[3][0] - prices[1][0] == pytest.approx(2 * per_epoch_cached)
    assert prices[3][1] - prices[1][1] == pytest.approx(2 * per_epoch_uncached)
    assert prices[3][0] < prices[3][1]


def test_the_cache_fills_once_per_front_point_and_split():
    sweep = _space(objectives=["tlm"], seeds=[0, 1, 2])
    ids = [t.trial_id for t in sweep.trials]
    assert len(ids) == 3
    one = estimate.estimate(sweep, {"trial": ids[:1]}, PROFILE).seconds["trial"]
    three = estimate.estimate(sweep, {"trial": ids}, PROFILE).seconds["trial"]
    fill = 1500 * 0.01 * 0.4
    assert three == pytest.approx(3 * one - 2 * fill)


def test_unknown_shapes_are_listed_not_priced():
    sweep = _space(objectives=["dm"])
    profile = dict(PROFILE, archs={})
    est = estimate.estimate(sweep, {"trial": [sweep.trials[0].trial_id]}, profile)
    assert est.uncalibrated == {"resnet_tiny@1x28", "the indices' algebra (no `algebra` timings)"}  # DM's own fit
    lines = estimate.describe(est, profile, sweep, 1)
    assert any("not priced" in line for line in lines)
    assert any(line.startswith("  total:") and "at least" in line for line in lines)  # a lower bound, said so


def test_refine_scales_by_measured_over_predicted(tmp_path):
    from sweep.store.results import SweepDir, write_rows
    from sweep.store.schema import trial_schema

    sweep = _space(objectives=["tlm"], seeds=[0, 1])
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    first, second = sweep.trials
    predicted_first = estimate.estimate(sweep, {"trial": [first.trial_id]}, PROFILE).seconds["trial"]
    row = {"trial_id": first.trial_id, "status": "done", "time_total_s": 4 * predicted_first}
    write_rows(sweep_dir.trial_part(first.trial_id), [row], trial_schema())
    est = estimate.estimate(sweep, {"trial": [second.trial_id]}, PROFILE)
    before = est.seconds["trial"]
    est = estimate.refine(est, sweep, sweep_dir, PROFILE)
    assert est.scale["trial"] == pytest.approx(4.0)
    assert est.seconds["trial"] == pytest.approx(4 * before)


def test_plan_estimate_prints_the_prediction(write_space, tiny_space, tmp_path, capsys):
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps(PROFILE))
    assert main(["plan", str(write_space(tiny_space)), "--estimate", "--costs", str(profile), "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "estimate with the made-up profile" in out and "4 trials:" in out and "with 2 worker(s)" in out
    assert main(["plan", str(write_space(tiny_space)), "--estimate", "--costs", str(tmp_path / "none.json")]) == 2
    assert "--costs: expected a cost profile" in capsys.readouterr().err
    assert main(["plan", "absent.yaml", "--estimate", "--costs", "no-such-profile"]) == 2  # before the space
    assert "or a shipped one (cpu-2core, nvidia-h200)" in capsys.readouterr().err
    profile.write_text(json.dumps(dict(PROFILE, algebra={"mac_s": 1e-9})))  # rates missing: said, by name
    assert main(["plan", str(write_space(tiny_space)), "--estimate", "--costs", str(profile)]) == 2
    assert "lacking decomp_s, values_s, elem_s, calls_s" in capsys.readouterr().err
    assert main(["plan", str(write_space(tiny_space)), "--estimate", "--costs", "nvidia-h200"]) == 0
    assert "estimate with the nvidia-h200 profile" in capsys.readouterr().out


@pytest.mark.slow  # plans every shipped space: about 12 s of CPU per profile
@pytest.mark.parametrize("name", sorted(p.stem for p in estimate.PROFILES.glob("*.json")))
def test_every_shipped_profile_prices_every_shipped_space(name):
    """Every shipped profile times every architecture and input shape of every shipped space; the CPU one
    prices everything (the GPU one lacks what was added after its card was last lent: it says so)."""
    profile = estimate.load_profile(name)  # a shipped profile by its name
    assert profile["name"] == name
    for path in sorted(Path(REPO / "search_spaces").glob("*.yaml")):
        sweep = load_space(str(path))
        plan = {k: list(KINDS[k].units(sweep)) for k in KINDS if KINDS[k].units(sweep)}
        est = estimate.estimate(sweep, plan, profile)
        shapes = {m for m in est.uncalibrated if "@" in m and " " not in m}
        assert not shapes, (path.name, shapes)
        if name == "cpu-2core":
            assert not est.uncalibrated, (path.name, est.uncalibrated)
        assert est.total > 0, path.name


RATES = {"mac_s": 1e-9, "decomp_s": 1e-8, "values_s": 1e-8, "elem_s": 1e-9, "calls_s": 0.25}


def test_a_trials_indices_are_priced_by_their_algebra_or_said_to_be_unpriced():
    from sweep.config.shapes import activation_shape

    sweep = _space(objectives=["tlm"], indices=["cka"], similarity_samples=150)  # no direct matching's fit
    (spec,) = sweep.trials
    without = estimate.estimate(sweep, {"trial": [spec.trial_id]}, PROFILE)
    assert "the indices' algebra (no `algebra` timings)" in without.uncalibrated
    priced = estimate.estimate(sweep, {"trial": [spec.trial_id]}, dict(PROFILE, algebra=RATES))
    assert not priced.uncalibrated
    # linear CKA of 150 flattened maps, the same shape on both sides and more features than images: two
    # 150 x 150 Grams of p features (multiply-adds), four passes over each side's float64 copy, three over
    # the Grams, and the call
    p = math.prod(activation_shape("resnet_tiny", "digits", "layer2.0"))
    assert p > 150
    cka = 2 * 150 * 150 * p * 1e-9 + (2 * 4 * 150 * p + 3 * 150 * 150) * 1e-9 + 0.25
    assert priced.seconds["trial"] - without.seconds["trial"] == pytest.approx(cka)


DETECTOR = {"layer2.0": {"step_s": 0.002, "forward_s": 0.001}}


def test_an_ood_detector_is_trained_once_per_end_point_and_setting():
    ood = {"outliers": ["noise"], "train_size": 400, "epochs": 3, "oe_epochs": 2, "samples": 100}
    sweep = _space(objectives=["tlm"], seeds=[0, 1], ood=ood)  # two trials at one end point
    first, second = (t.trial_id for t in sweep.trials)
    profile = copy.deepcopy(PROFILE)
    assert (
        "the small OOD detector of resnet_tiny@1x28"
        in estimate.estimate(sweep, {"trial": [first]}, profile).uncalibrated
    )
    profile["archs"]["resnet_tiny@1x28"]["detector"] = {"small": DETECTOR}
    one = estimate.estimate(sweep, {"trial": [first]}, profile).seconds["trial"]
    both = estimate.estimate(sweep, {"trial": [first, second]}, profile).seconds["trial"]
    # training, once: the 400 outliers through g<=layer2.0 (the training images' activations are cached), 3
    # epochs of 400 steps, 2 of outlier exposure at twice the images
    training = 400 * 0.01 * 0.4 + (3 * 400 + 2 * 2 * 400) * 0.002
    fill = 1500 * 0.01 * 0.4  # the front's cache, filled once too
    assert 2 * one - both == pytest.approx(training + fill)
    # every trial: 100 outliers through g<=layer2.0, 300 activations through the detector
    per_trial = 100 * 0.01 * 0.4 + 300 * 0.001
    no_ood = _space(objectives=["tlm"], seeds=[0, 1])
    plain = estimate.estimate(no_ood, {"trial": [t.trial_id for t in no_ood.trials]}, profile).seconds["trial"]
    assert both - plain == pytest.approx(training + 2 * per_trial)


@pytest.mark.slow  # about 15 s of CPU on a 2-core x86-64 CPU
def test_calibration_measures_every_entry_the_model_reads():
    """A profile measured here (`sweep.planning.calibration`, tiny sizes): every stitch point's share and OOD detector
    timings, shares growing along the network, and every algebra rate the model prices with."""
    from sweep.costs.work import RATES
    from sweep.planning.calibration import algebra, calibrate

    entry = calibrate([("resnet_tiny", 1, 28)], "cpu", batch=8, repeats=1)["resnet_tiny@1x28"]
    shares = [entry["share"][p] for p in PROFILE["archs"]["resnet_tiny@1x28"]["share"]]
    assert shares == sorted(shares) and 0 < shares[0] and shares[-1] <= 1
    assert set(entry["detector"]["small"]) == set(PROFILE["archs"]["resnet_tiny@1x28"]["share"])
    assert all(t["step_s"] > 0 and t["forward_s"] > 0 for t in entry["detector"]["small"].values())
    assert entry["forward_s"] > 0 and entry["step_s"] > 0
    rates = algebra("cpu", repeats=1)
    assert set(rates) == set(RATES) and all(v > 0 for v in rates.values())


def test_the_estimate_includes_the_fixed_costs_per_unit_per_stage_and_of_the_command():
    """N units cost at least N x the per-unit fixed cost; the wall time adds the command's start-up and each
    stage's fixed cost to the work spread over the workers (a profile timed with 2 threads, 1 per unit)."""
    from sweep.planning.wall import wall_time

    profile = dict(PROFILE, startup_s=7.0, stage_s=3.0, threads=2)
    sweep = _space(objectives=["tlm"], seeds=[0, 1])
    n = len(sweep.trials)
    est = estimate.estimate(sweep, {"trial": [t.trial_id for t in sweep.trials]}, profile)
    assert est.seconds["trial"] >= n * profile["unit_s"]
    missing: set = set()
    wall = wall_time(est.seconds, est.units, profile, sweep, 2, missing)
    assert not missing and wall.startup == 7.0 and wall.stages == 3.0 and wall.n_stages == 1
    # 2 workers of 1 thread each run what the profile timed with 2 threads: the work takes its device time
    assert wall.work == pytest.approx(est.seconds["trial"] * 2 / (min(n, 2) * 1))
    assert wall.total == pytest.approx(7.0 + 3.0 + wall.work)
    wall_time(est.seconds, est.units, PROFILE, sweep, 2, missing)  # a profile without them says so
    assert any("startup_s" in m for m in missing) and any("stage_s" in m for m in missing)
    shipped = estimate.load_profile()  # the shipped CPU profile carries measured fixed costs
    assert shipped["startup_s"] > 0 and shipped["stage_s"] > 0 and shipped["threads"] >= 1


def test_a_later_stage_pays_for_the_workers_that_start_beside_the_one_kept():
    from sweep.planning.wall import later_stages

    assert later_stages([]) == 0.0 and later_stages([4]) == 1.0  # the first stage's workers start side by side
    assert later_stages([1, 1, 1]) == 1.0  # one unit at a time: the kept worker runs every later stage
    assert later_stages([2, 4]) == pytest.approx(1.0 + 3 / 4)  # 3 new workers beside the kept one


def test_a_trial_priced_after_its_donor_reads_the_fronts_test_activations_the_donor_stage_filled():
    """The donor's evaluation passes the test images through the whole donor once (`sweep.worker.feed`): a
    trial priced after it pays no pass of its front over them (300 images through f<=layer2.0, share 0.4);
    without the cache it does."""
    sweep = _space(objectives=["dm"], dm_samples=100)
    (spec,) = sweep.trials
    plan = {"donor": ["plain_a"], "trial": [spec.trial_id]}
    for cache, saved in ((True, 300 * 0.01 * 0.4), (False, 0.0)):
        alone = estimate.estimate(sweep, {"trial": [spec.trial_id]}, PROFILE, cache=cache).seconds["trial"]
        after = estimate.estimate(sweep, plan, PROFILE, cache=cache).seconds["trial"]
        assert alone - after == pytest.approx(saved)


@pytest.fixture
def plugin_cnn():
    """`my_cnn`, a 2-point CNN registered as a user's plugin registers it (no entry in any profile)."""
    from torch import nn

    from sweep.models.base import ARCHITECTURES, Normalize, StagedNet, register_architecture

    @register_architecture("my_cnn", "a user's 2-point CNN")
    def my_cnn(*, in_channels, num_classes, mean, std, image_size):
        conv = nn.Sequential(Normalize(mean, std), nn.Conv2d(in_channels, 8, 3, 2, 1), nn.ReLU())
        head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, num_classes))
        return StagedNet([("conv1", conv), ("conv2", nn.Conv2d(8, 16, 3, 2, 1)), ("head", head)], ["conv1", "conv2"])

    yield "my_cnn"
    ARCHITECTURES.remove("my_cnn")


def _plugin_space(arch: str):
    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["plain_a"]["arch"] = arch
    space["stitching"].update(stitch_points=["conv2"], objectives=["dm"])
    return parse_space(space)


def test_a_plugin_architecture_the_profile_lacks_is_measured_here_and_said_so(plugin_cnn, monkeypatch):
    """Timed here as calibration times a profile's entries (a few forward and backward passes of the built
    network at the space's input), then priced like a shipped one and named on its own line."""
    from sweep.planning import calibration

    monkeypatch.setattr(calibration, "_MEASURED", {})
    sweep = _plugin_space(plugin_cnn)
    plan = {"donor": ["plain_a"], "trial": [t.trial_id for t in sweep.trials]}
    unmeasured = estimate.estimate(sweep, plan, PROFILE, measure=False)
    assert "my_cnn@1x28" in unmeasured.uncalibrated and not unmeasured.measured
    est = estimate.estimate(sweep, plan, PROFILE)
    assert "my_cnn@1x28" not in est.uncalibrated and set(est.measured) == {"my_cnn@1x28"}
    assert est.seconds["donor"] > unmeasured.seconds["donor"] and est.seconds["trial"] > unmeasured.seconds["trial"]
    (line,) = [x for x in estimate.describe(est, PROFILE, sweep, 1) if "measured here" in x]
    assert line.startswith("  my_cnn@1x28 measured here") and "forward+backward passes of 128 images" in line
    assert "forward of resnet_tiny@1x28, timed in turn" in line  # in the profile's seconds, by a network it knows
    assert est.per_unit["donor"][0][1:] == ("my_cnn", est.seconds["donor"], True)  # its class, priced whole
    assert not unmeasured.per_unit["donor"][0].priced  # a lower bound, which the ETA never scales by


def test_a_measured_entry_is_in_the_profiles_seconds_and_measured_once(plugin_cnn, monkeypatch):
    """The plugin and the profile's resnet_tiny are timed in turn: here the plugin's forward and step take a
    tenth of resnet_tiny's (the ratio of each round's, their median), so in the profile's seconds they are a
    tenth of its entry's. A second estimate reuses the measurement; one that raises leaves the shape unpriced,
    with why."""
    from sweep.planning import calibration

    calls = []

    def in_turn(nets, dev):  # fake timings, no clock read: a busy round (the third) slows both alike
        calls.append([n[0].stage_names[0] for n in nets])
        return [([0.002, 0.002, 0.02], [0.006, 0.006, 0.06]), ([0.02, 0.02, 0.2], [0.06, 0.06, 0.6])]

    monkeypatch.setattr(calibration, "_MEASURED", {})
    monkeypatch.setattr(calibration, "_in_turn", in_turn)
    monkeypatch.setattr(calibration, "_passes", lambda *a: {"forward_s": 1.0, "step_s": 1.0, "share": {"conv1": 0.5}})
    sweep = _plugin_space(plugin_cnn)
    plan = {"donor": ["plain_a"]}
    est = estimate.estimate(sweep, plan, PROFILE)
    entry = {"forward_s": 0.001, "step_s": 0.003, "share": {"conv1": 0.5}, "detector": {}}
    by_hand = estimate.estimate(sweep, plan, dict(PROFILE, archs={**PROFILE["archs"], "my_cnn@1x28": entry}))
    assert est.seconds["donor"] == pytest.approx(by_hand.seconds["donor"])
    assert "0.10x the step and 0.10x the forward of resnet_tiny@1x28" in est.measured["my_cnn@1x28"]
    assert calls == [["conv1", "stem"]]  # the plugin, then the shipped network the profile prices
    estimate.estimate(sweep, plan, PROFILE)
    assert len(calls) == 1  # measured once per process

    def failing(*args):
        raise RuntimeError("no such kernel")

    monkeypatch.setattr(calibration, "_MEASURED", {})
    monkeypatch.setattr(calibration, "_passes", failing)
    est = estimate.estimate(sweep, plan, PROFILE)
    assert est.uncalibrated == {"my_cnn@1x28 (measuring it here failed: RuntimeError: no such kernel)"}


def test_the_etas_unit_prices_carry_each_units_architectures_in_the_stages_order(tmp_path):
    """`unit_prices`: per unit, its architectures (the ETA's classes) and whether the profile priced all of it;
    a shipped architecture the profile lacks is never measured (that would import PyTorch): it stays a lower
    bound."""
    from sweep.registry import KINDS

    sweep = _space(objectives=["dm", "tlm"])
    plan = {"donor": ["plain_a"], "trial": [t.trial_id for t in sweep.trials]}
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(PROFILE))
    prices, stage_s = estimate.unit_prices(sweep, plan, str(path))
    assert stage_s == 0.0 and [r.group for r in prices["donor"]] == ["resnet_tiny"]
    units, locality = KINDS["trial"].units(sweep), KINDS["trial"].locality
    assert [r.unit for r in prices["trial"]] == sorted(plan["trial"], key=lambda u: locality(units[u]))
    assert {r.group for r in prices["trial"]} == {"resnet_tiny"}
    objective = {t.trial_id: t.objective for t in sweep.trials}
    # PROFILE has no algebra rates: DM's fit is not priced, its price a lower bound; TLM's is whole
    assert {(objective[r.unit], r.priced) for r in prices["trial"]} == {("dm", False), ("tlm", True)}
    path.write_text(json.dumps(dict(PROFILE, archs={})))
    prices, _ = estimate.unit_prices(sweep, plan, str(path))
    assert not any(r.priced for rows in prices.values() for r in rows)


def test_a_library_network_is_measured_here_as_a_plugin_architecture(monkeypatch):
    """`torchvision:<name>` is in no shipped profile: `plan --estimate` measures it here (at the space's input:
    1 channel resized to 32 px) and prices its donor and trials with the measured entry, named on its own line."""
    from sweep.planning import calibration

    monkeypatch.setattr(calibration, "_MEASURED", {})
    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["plain_a"]["arch"] = "torchvision:resnet18"
    space["stitching"].update(stitch_points=["layer2"], objectives=["dm"])
    sweep = parse_space(space)
    plan = {"donor": sorted(sweep.donors), "trial": [t.trial_id for t in sweep.trials]}
    unmeasured = estimate.estimate(sweep, plan, PROFILE, measure=False)
    (key,) = [k for k in unmeasured.uncalibrated if k.startswith("torchvision:resnet18@")]
    est = estimate.estimate(sweep, plan, PROFILE)
    assert key not in est.uncalibrated and set(est.measured) == {key}
    assert est.seconds["donor"] > unmeasured.seconds["donor"] and est.seconds["trial"] > unmeasured.seconds["trial"]
    assert est.per_unit["donor"][0][1:] == ("torchvision:resnet18", est.seconds["donor"], True)
