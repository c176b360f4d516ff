"""The `examples` kind (Smith & Marcu 2024 Fig. 1a, Figs A1-A2; Cianfarani et al. 2022 Fig. 8): what each kind
of picture holds, checked against the data, the colour map, Algorithm 1's base activations and the attacks'
budgets; the refusals name the field; the report draws the pictures."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import analysis
from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.data.colour_digits import COLOUR_MAP
from sweep.data.core import make_splits
from sweep.kinds.base import RunContext
from sweep.kinds.donor.run import run_donor
from sweep.kinds.examples.run import run_examples
from sweep.store.results import SweepDir
from tests.conftest import TINY_SPACE

CPU = torch.device("cpu")
NOISE = {"noise": {"sigma": 0.05, "train_per_class": 10, "test_per_class": 10}}


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """The tiny donor, trained once, and its results folder."""
    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["noise"] = NOISE
    del space["stitching"]
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path_factory.mktemp("results"), sweep.name)
    sweep_dir.create()
    assert run_donor(sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, CPU)["status"] == "done"
    return space, sweep_dir


def _units(zoo, entry) -> tuple:
    return parse_space({**copy.deepcopy(zoo[0]), "examples": entry}).units["examples"]


def _rows(zoo, unit):
    assert run_examples(unit, RunContext(zoo[1], CPU))["status"] == "done"
    rows = analysis.load(zoo[1].path)["examples"]
    return rows[rows["unit_id"] == unit.unit_id].reset_index(drop=True)


def _image(row) -> np.ndarray:
    return np.frombuffer(row.pixels, dtype=np.uint8).reshape(row.channels, row.height, row.width) / 255.0


@pytest.mark.slow
def test_images_are_test_images_of_the_classes_asked_for(zoo):
    (unit,) = _units(zoo, {"show": "images", "datasets": ["digits"], "classes": [3, 7], "per_class": 5, "seed": 2})
    rows = _rows(zoo, unit)
    splits = make_splits("digits", None, 0, None)
    assert rows["label"].tolist() == [3] * 5 + [7] * 5 and rows["column"].tolist() == list(range(10))
    assert rows["image"].nunique() == 10
    for r in rows.itertuples():
        assert int(splits.test_y[r.image]) == r.label
        assert np.abs(_image(r) - splits.test_x[r.image].numpy()).max() <= 0.5 / 255 + 1e-6  # 8-bit rounding


@pytest.mark.slow
def test_the_palette_is_the_colour_map(zoo):
    (unit,) = _units(zoo, {"show": "palette", "datasets": ["fashion_mnist_colour"]})
    rows = _rows(zoo, unit)
    assert len(rows) == len(COLOUR_MAP)
    for r in rows.itertuples():
        assert (np.frombuffer(r.pixels, dtype=np.uint8).reshape(3, -1).T == COLOUR_MAP[r.label]).all()


@pytest.mark.slow
def test_a_noise_sample_clusters_around_its_classs_base_activation(zoo):
    """Algorithm 1-2: the sample of class c is base_c + sigma z (clamped), base_c uniform on [0, 1) and drawn
    from the trial's seed, receiver and point: within 5 sigma of that base everywhere, far from another
    class's base (a wrong seed, class or point gives a base about 1/3 away on average)."""
    from sweep.stitching.noise import noise_seed

    (unit,) = _units(zoo, {"show": "noise", "senders": ["noise:noise"], "receivers": ["zoo:plain_a"],
                           "points": ["layer1.0"], "classes": [2], "maps": 12, "seed": 3})  # fmt: skip
    rows = _rows(zoo, unit)
    assert unit.maps == 8 and len(rows) == 8 and rows["column"].max() == 7  # capped at the point's 8 channels
    maps = np.stack([_image(r)[0] for r in rows.sort_values("row", kind="stable").itertuples()])
    gen = torch.Generator().manual_seed(noise_seed(3, unit.donor_key, "layer1.0"))
    base = torch.rand((10, *unit_shape(unit)), generator=gen).numpy()
    assert np.abs(maps - base[2, :8]).max() <= 5 * 0.05 + 1 / 255
    assert np.abs(maps - base[1, :8]).mean() > 0.15


def unit_shape(unit) -> tuple:
    from sweep.config.shapes import activation_shape

    return activation_shape(unit.arch, unit.dataset, unit.point)


@pytest.mark.slow
def test_attacked_images_stay_within_each_budget_and_the_perturbation_is_magnified(zoo):
    attacks = [{"threat": "linf", "eps": 0.1, "steps": 3}, {"threat": "l2", "eps": 0.5}]
    (unit,) = _units(zoo, {"show": "attacks", "donors": ["zoo:plain_a"], "images": 2, "attacks": attacks})
    rows = _rows(zoo, unit)
    assert rows["row"].drop_duplicates().tolist() == [
        "benign", "linf eps 0.1", "linf eps 0.1: perturbation", "l2 eps 0.5", "l2 eps 0.5: perturbation"]  # fmt: skip
    benign = {r.column: _image(r) for r in rows[rows["row"] == "benign"].itertuples()}
    for r in rows[rows["threat"].notna() & ~rows["row"].str.endswith("perturbation")].itertuples():
        delta = _image(r) - benign[r.column]
        size = np.abs(delta).max() if r.threat == "linf" else np.sqrt((delta**2).sum())
        slack = 1 / 255 if r.threat == "linf" else np.sqrt(delta.size) / 255  # both pictures rounded to 8 bits
        assert size <= r.eps + slack
    for r in rows[rows["row"].str.endswith("perturbation")].itertuples():
        assert np.abs(_image(r) - 0.5).max() == pytest.approx(0.5, abs=1 / 255)  # the largest change spans [0, 1]


@pytest.mark.slow
def test_a_report_draws_the_pictures(zoo, tmp_path):
    from analysis.charts.examples import pictures
    from analysis.report.write import write_report

    (unit,) = _units(zoo, {"show": "images", "datasets": ["digits"], "per_class": 2})
    _rows(zoo, unit)
    pics = pictures(analysis.load(zoo[1].path)["examples"])
    assert pics["url"].str.startswith("data:image/png;base64,").all()
    write_report(zoo[1].path, tmp_path / "report")
    assert (tmp_path / "report" / "examples.png").stat().st_size > 1000


@pytest.mark.slow
@pytest.mark.parametrize(
    "entry, field, found",
    [
        ({"show": "images", "datasets": ["digits"], "senders": ["noise:noise"]}, "examples.senders", "senders"),
        ({"show": "palette", "datasets": ["digits"]}, "examples.datasets", "digits"),
        ({"show": "images", "datasets": ["digits"], "classes": [10]}, "examples.classes[0]", "10"),
        (
            {"show": "noise", "senders": ["zoo:plain_a"], "receivers": ["zoo:plain_a"], "points": ["layer1.0"]},
            "examples.senders[0]",
            "zoo:plain_a",
        ),  # fmt: skip
        (
            {"show": "noise", "senders": ["noise:noise"], "receivers": ["zoo:plain_a"], "points": ["layer9"]},
            "examples.points[0]",
            "layer9",
        ),  # fmt: skip
        (
            {"show": "attacks", "donors": ["zoo:plain_a"], "attacks": [{"threat": "l2"}]},
            "examples.attacks[0].eps",
            "nothing",
        ),  # fmt: skip
        ({"show": "attacks", "donors": ["noise:noise"], "attacks": [{"eps": 0.1}]}, "examples.donors[0]", "noise"),
    ],
)
def test_bad_entries_are_refused_naming_the_field(zoo, entry, field, found):
    with pytest.raises(SpecError) as err:
        _units(zoo, entry)
    assert err.value.field == field and found in str(err.value)


@pytest.mark.slow
def test_a_papers_page_draws_each_item_from_its_own_panel(zoo, tmp_path):
    """Smith & Marcu's Figs 1a and A1 come from one examples chart: each item's picture holds its panel only
    (in a results folder of their own: neither unit reads a donor)."""
    import json

    from analysis.report.paper import write_paper_report

    results = SweepDir(tmp_path / "results", "tiny")
    results.create()
    for unit in _units(zoo, [{"name": "fig_1a", "show": "images", "datasets": ["digits"], "per_class": 1},
                             {"name": "fig_a1", "show": "palette", "datasets": ["fashion_mnist_colour"]}]):  # fmt: skip
        assert run_examples(unit, RunContext(results, CPU))["status"] == "done"
    write_paper_report("smith-marcu-2024", [results.path], tmp_path / "page")
    for stem, n in (("fig-1a", 2), ("fig-a1", len(COLOUR_MAP))):
        spec = json.loads((tmp_path / "page" / f"{stem}_examples_tiny.vl.json").read_text())
        (rows,) = spec["datasets"].values()
        assert len(rows) == n and {r["panel"] for r in rows} == {stem.replace("-", "_")}


def test_the_json_schema_knows_which_fields_each_kind_of_picture_takes():
    """The schema an editor checks spaces with says what the parser says: `datasets` with images (the default
    show) and palette, `senders` only with noise, `attacks` only with attacks."""
    import jsonschema

    from sweep.config.schema import space_schema

    space = {"name": "x", "data": {"dataset": "digits"}, "donors": {"a": {"arch": "resnet_tiny", "epochs": 1}}}
    valid = jsonschema.Draft202012Validator(space_schema()).is_valid
    assert valid({**space, "examples": [{"datasets": ["digits"]}, {"show": "palette", "datasets": ["digits"]}]})
    assert not valid({**space, "examples": [{"show": "noise", "datasets": ["digits"]}]})
    assert not valid({**space, "examples": [{"show": "images", "datasets": ["digits"], "senders": ["noise:n"]}]})
    assert not valid({**space, "examples": [{"show": "attacks", "donors": ["zoo:a"]}]})  # no attacks
    assert valid({**space, "examples": [{"show": "attacks", "donors": ["zoo:a"], "attacks": [{"eps": 0.1}]}]})
