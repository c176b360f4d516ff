"""The cost model (`sweep.estimate`, `stitchsweep plan --estimate`): its prices against the documented
formulas worked by hand on a made-up profile, the cache's one pass per front, refinement by recorded
timings, and the shipped profile covering the shipped spaces."""

import copy
import json
from pathlib import Path

import pytest

from sweep import estimate
from sweep.cli import main
from sweep.config.space import load_space, parse_space
from sweep.registry import KINDS

from .conftest import REPO, TINY_SPACE

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
    # cache fill: (1000 + 200 + 300) images through f<=layer2.0 (share 0.4) at 0.01 s
    fill = 1500 * 0.01 * 0.4
    # test images through g>layer2.0 (share 0.6); K = 100 through g<=layer2.0 (share 0.4); no front: cached
    expected = 0.5 + fill + 100 * 0.01 * 0.4 + 300 * 0.01 * 0.6
    assert _trial_seconds(sweep, "dm") == pytest.approx(expected)
    # without the cache: K images through the front instead of the fill, and the test images through it too
    uncached = 0.5 + 100 * 0.01 * 0.4 * 2 + 300 * 0.01 * 0.6 + 300 * 0.01 * 0.4
    assert _trial_seconds(sweep, "dm", cache=False) == pytest.approx(uncached)


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
    pricer = estimate.Pricer(PROFILE, set())
    assert estimate._attack(pricer, "resnet_tiny", "digits", 10, ("apgd-ce", "apgd-t"), 20, 2) == pytest.approx(
        10 * 2 * 20 * 2 * 0.03
    )
    assert estimate._attack(pricer, "resnet_tiny", "digits", 10, ("standard",), 20, 1) == pytest.approx(
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
    assert est.uncalibrated == {"resnet_tiny@1x28"}
    lines = estimate.describe(est, profile, sweep, 1)
    assert any("not priced" in line for line in lines)
    assert any(line.startswith("  total:") and "at least" in line for line in lines)  # a lower bound, said so


def test_refine_scales_by_measured_over_predicted(tmp_path):
    from analysis.store.schema import trial_schema
    from sweep.results import SweepDir, write_rows

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
    assert "estimate with the made-up profile" in out and "4 trials:" in out and "on 2 worker(s)" in out
    assert main(["plan", str(write_space(tiny_space)), "--estimate", "--costs", str(tmp_path / "none.json")]) == 2
    assert "--costs: expected a cost profile" in capsys.readouterr().err
    assert main(["plan", "absent.yaml", "--estimate", "--costs", "no-such-profile"]) == 2  # before the space
    assert "or a shipped one (cpu-2core, nvidia-h200)" in capsys.readouterr().err
    assert main(["plan", str(write_space(tiny_space)), "--estimate", "--costs", "nvidia-h200"]) == 0
    assert "estimate with the nvidia-h200 profile" in capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(p.stem for p in estimate.PROFILES.glob("*.json")))
def test_every_shipped_profile_prices_every_shipped_space(name):
    profile = estimate.load_profile(name)  # a shipped profile by its name
    assert profile["name"] == name
    for path in sorted(Path(REPO / "search_spaces").glob("*.yaml")):
        sweep = load_space(str(path))
        plan = {k: list(KINDS[k].units(sweep)) for k in KINDS if KINDS[k].units(sweep)}
        est = estimate.estimate(sweep, plan, profile)
        assert not est.uncalibrated, (path.name, est.uncalibrated)
        assert est.total > 0, path.name
