"""Representation tests (Balogh & Jelasity 2025 Section 5): spec, probes, low-rank maps, a real unit, the statistics."""

import copy

import numpy as np
import pandas as pd
import pytest
import torch

import analysis
from analysis.stats import correlation_table, rank_correlations
from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.kinds.donor.run import run_donor
from sweep.kinds.reptest.run import LowRank, run_reptest
from sweep.measures.probing import linear_probe_accuracy
from sweep.store.results import SweepDir
from tests.conftest import TINY_SPACE
from tests.ties import count, near_ties


def _space(tests):
    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["plain_b"] = dict(space["donors"]["plain_a"], seed=1)
    del space["stitching"]
    space["representation_tests"] = tests
    space["evaluation"]["n_eval_robust"] = 0
    return space


SENS = {
    "test": "sensitivity",
    "donors": ["zoo:plain_a"],
    "layers": ["layer2.1", "layer3.1"],
    "ranks": [1, 8, 4],
    "samples": 200,
    "probe": {"train_size": 600, "epochs": 15, "lr": 0.01},
}
SPEC = {
    "test": "specificity",
    "donors": ["zoo:plain_a", "zoo:plain_b"],
    "layers": ["layer2.1", "layer3.1"],
    "samples": 200,
    "probe": {"train_size": 600, "epochs": 15, "lr": 0.01},
}


def test_units_expand_per_donor_and_layer_with_ranks_largest_first():
    sweep = parse_space(_space([SENS, SPEC]))
    assert sweep.trials == () and set(sweep.donors) == {"plain_a", "plain_b"}
    sens = [u for u in sweep.reptests if u.test == "sensitivity"]
    assert len(sens) == 2 and [m[3] for m in sens[0].members] == [None, 8, 4, 1]
    # a listed rank equal to the layer's channel count (layer2.1: 16) is the full-rank member, not a second one
    listed = parse_space(_space([dict(SENS, ranks=[16, 8, 1])]))
    assert [[m[3] for m in u.members] for u in listed.reptests] == [[None, 8, 1], [None, 16, 8, 1]]
    spec = next(u for u in sweep.reptests if u.test == "specificity")
    assert len(spec.members) == 4 and {m[0] for m in spec.members} == {"zoo:plain_a", "zoo:plain_b"}
    assert len({u.unit_id for u in sweep.reptests}) == 3


@pytest.mark.parametrize(
    "change,field,found",
    [
        ({"ranks": [33]}, "representation_tests[0].ranks", "at most its 16 channels"),
        ({"indices": ["cka", "svcca"]}, "representation_tests[0].indices[1]", "svcca"),
        ({"dm_samples": 1}, "representation_tests[0].dm_samples", "K >= "),
        (
            {"test": "specificity", "donors": ["zoo:plain_a", "zoo:plain_b"]},
            "representation_tests[0].ranks",
            "no ranks",
        ),
        ({"layers": ["layer9"]}, "representation_tests[0].layers[0]", "layer9"),
    ],
)
def test_bad_representation_tests_are_refused_naming_the_field(change, field, found):
    with pytest.raises(SpecError) as err:
        parse_space(_space([dict(SENS, **change)]))
    assert str(err.value).startswith(field + ":") and found in str(err.value), str(err.value)


def test_specificity_needs_two_donors():
    with pytest.raises(SpecError, match=r"^representation_tests\[0\].donors: expected at least two"):
        parse_space(_space([dict(SPEC, donors=["zoo:plain_a"])]))


def test_linear_probe_learns_separable_labels_and_refuses_nan():
    rng = np.random.default_rng(0)
    y = torch.from_numpy(rng.integers(0, 3, 600))
    x = torch.randn(600, 20) * 0.3
    x[torch.arange(600), y] += 3.0
    assert linear_probe_accuracy(x[:400], y[:400], x[400:], y[400:], 3, epochs=20, lr=0.05) > 0.95
    with pytest.raises(ValueError, match="NaN"):
        linear_probe_accuracy(x[:400] * float("nan"), y[:400], x[400:], y[400:], 3)


def test_low_rank_map_works_in_the_channel_space():
    """Balogh & Jelasity 2025 5.1's approximation as its reference code computes it: every position's channel vector is
    projected onto the top-k channel directions. Exact on maps whose channel vectors span k dimensions; the
    (N*H*W, C) matrix of the rank-1 output has rank 1; and it equals the independent centred-SVD projection
    of that matrix."""
    gen = torch.Generator().manual_seed(0)
    codes = torch.randn(300 * 4 * 4, 3, generator=gen)
    rows = codes @ torch.randn(3, 6, generator=gen) + 5.0  # 6 channels whose vectors span 3 directions
    acts = rows.reshape(300, 4, 4, 6).permute(0, 3, 1, 2).contiguous()
    assert torch.allclose(LowRank(acts, 3)(acts), acts, atol=1e-4)
    one = LowRank(acts, 1)(acts)
    one_rows = one.permute(0, 2, 3, 1).reshape(-1, 6)
    assert torch.linalg.matrix_rank(one_rows - one_rows.mean(0)) == 1
    full = torch.randn(300, 6, 4, 4, generator=gen)
    r = full.permute(0, 2, 3, 1).reshape(-1, 6).double()
    u, s, vh = np.linalg.svd((r - r.mean(0)).numpy(), full_matrices=False)
    expected = (u[:, :2] * s[:2]) @ vh[:2] + r.mean(0).numpy()
    got = LowRank(full, 2)(full).permute(0, 2, 3, 1).reshape(-1, 6).double().numpy()
    np.testing.assert_allclose(got, expected, atol=1e-4)


@pytest.fixture(scope="module")
def unit_dir(tmp_path_factory):
    sweep = parse_space(_space([SENS, SPEC]))
    sweep_dir = SweepDir(tmp_path_factory.mktemp("r"), sweep.name)
    sweep_dir.create()
    for d in sweep.donors.values():
        assert run_donor(d, sweep.donor_evals[d.name], sweep_dir, torch.device("cpu"))["status"] == "done"
    outs = [run_reptest(u, sweep_dir, torch.device("cpu")) for u in sweep.reptests]
    assert all(o["status"] == "done" for o in outs), outs
    assert run_reptest(sweep.reptests[0], sweep_dir, torch.device("cpu"))["status"] == "skipped"
    return sweep_dir


@pytest.fixture(scope="module")
def unit_results(unit_dir):
    return analysis.load_reptests(unit_dir.path)


def _reference_logits(unit_results, sweep_dir, layer):
    """The logits of the sensitivity reference A's own network (its front, low-rank when A is a low-rank member,
    and its end) on the unit's test images, computed here from the donor and the spec's sizes."""
    from sweep.data.core import make_splits
    from sweep.models.base import split
    from sweep.train.evaluate import activations
    from sweep.worker.zoo import load_donor

    (spec,) = [
        u for u in parse_space(_space([SENS, SPEC])).reptests if u.test == "sensitivity" and u.members[0][2] == layer
    ]
    ref = unit_results[(unit_results["unit_id"] == spec.unit_id) & unit_results["reference"]].iloc[0]
    splits = make_splits(spec.dataset, spec.train_size, spec.val_size, spec.test_size)
    front, end = split(load_donor(sweep_dir, ref["donor_key"], torch.device("cpu")), layer)
    if not pd.isna(ref["rank"]):
        xtr = splits.train_x[: spec.probe_train_size]
        front = torch.nn.Sequential(
            front, LowRank(activations(front.eval(), xtr, torch.device("cpu")), int(ref["rank"]))
        )
    with torch.no_grad():
        return end.eval()(front.eval()(splits.test_x[: spec.samples])), splits.test_y[: spec.samples]


@pytest.mark.slow
def test_sensitivity_unit_measures_every_rank_against_the_best_probe(unit_results, unit_dir):
    sens = unit_results[(unit_results["test"] == "sensitivity") & (unit_results["layer"] == "layer3.1")]
    assert len(sens) == 4 and sens["reference"].sum() == 1
    ref = sens[sens["reference"]].iloc[0]
    # the reference is the argmax of the recorded probe accuracies (a selection: exact); which member wins depends
    # on the machine's training (a low-rank member may tie or beat full rank: rank 8 did on an AVX2 kernel path)
    assert ref["probe_acc"] == sens["probe_acc"].max() and ref["probe_gap"] == 0.0
    for col in ("d_cka", "d_pwcca", "d_opd", "d_dm"):
        assert abs(ref[col]) < 1e-6, col  # A against itself: rounding-level (measured <= 1e-14 for d_dm)
    # functional DM of A into itself: A's own network up to rounding, so its accuracy moves by at most A's near
    # ties (tests/ties.py), relative to A's own network's accuracy (which a low-rank A lowers)
    logits, labels = _reference_logits(unit_results, unit_dir, "layer3.1")
    correct = int((logits.argmax(1) == labels).sum())
    assert abs(count(ref["dm_func_acc"], len(labels)) - correct) <= near_ties(logits)
    assert abs(ref["d_dm_func"]) <= near_ties(logits) / correct + 1e-12
    rank1 = sens[sens["rank"] == 1].iloc[0]
    assert rank1["probe_acc"] < ref["probe_acc"] and rank1["d_cka"] > 0.05 and rank1["d_dm_func"] > 0.05
    # a rank-1 B matches one of A's canonical directions: PWCCA well below 1 (the zero-padded definition)
    assert rank1["d_pwcca"] > 0.3 and rank1["d_opd"] > 0.05
    by_rank = sens[sens["rank"].notna()].sort_values("rank")
    assert by_rank["d_pwcca"].is_monotonic_decreasing  # more of A matched as the rank grows


@pytest.mark.slow
def test_specificity_unit_covers_every_layer_of_every_donor(unit_results):
    spec = unit_results[unit_results["test"] == "specificity"]
    assert len(spec) == 4 and set(spec["donor"]) == {"zoo:plain_a", "zoo:plain_b"}
    assert spec["d_pwcca"].notna().all() and (spec["d_cka"] >= -1e-9).all()


@pytest.mark.slow
def test_rank_correlations_and_tables(unit_results):
    per_unit = rank_correlations(unit_results)
    assert set(per_unit["index"]) == {"cka", "pwcca", "opd", "dm (struct.)", "dm (func.)"}
    assert per_unit["tau"].between(-1, 1).all() and per_unit["rho_p"].between(0, 1).all()
    table = correlation_table(per_unit)
    assert set(table["test"]) == {"sensitivity", "specificity"}
    assert table.loc[table["test"] == "sensitivity", "units"].eq(2).all()


def test_rank_correlation_math_and_constant_inputs():
    base = dict(unit_id="u", test="sensitivity", name=None, arch="a", dataset="d", status="done")
    rows = [dict(base, probe_gap=g, d_cka=g * 2, d_opd=1.0 - g, d_pwcca=0.5) for g in (0.0, 0.1, 0.2, 0.4)]
    per = rank_correlations(pd.DataFrame(rows)).set_index("index")
    assert per.loc["cka", "tau"] == pytest.approx(1.0) and per.loc["cka", "rho"] == pytest.approx(1.0)
    assert per.loc["opd", "tau"] == pytest.approx(-1.0) and per.loc["opd", "tau_p"] > 0.9  # one-sided
    assert np.isnan(per.loc["pwcca", "tau"]) and per.loc["pwcca", "note"] == "constant"
    # over two units: the constant one is counted and left out of the means
    other = [dict(r, unit_id="v", d_cka=1.0 - r["probe_gap"], d_pwcca=r["probe_gap"]) for r in rows]
    table = correlation_table(rank_correlations(pd.DataFrame(rows + other))).set_index("index")
    assert table.loc["cka", "units"] == 2 and table.loc["cka", "constant"] == 0
    assert table.loc["cka", "tau"] == pytest.approx(0.0)  # +1 and -1
    assert table.loc["pwcca", "constant"] == 1 and table.loc["pwcca", "tau"] == pytest.approx(1.0)


def test_paper_scale_sensitivity_test_plans_13_and_14_channel_ranks():
    """Balogh & Jelasity 2025 5.1: 13 ranks for blocks 5-6 (256 channels) and 14 for blocks 7-8 (512), full rank to
    1."""
    from sweep.config.space import load_space
    from tests.conftest import REPO

    sweep = load_space(REPO / "search_spaces" / "ding_tests_cifar10.yaml")
    sens = [u for u in sweep.reptests if u.test == "sensitivity"]
    counts = {}
    for u in sens:
        ranks = [m[3] for m in u.members]
        assert ranks[0] is None and ranks[-1] == 1 and len(set(ranks)) == len(ranks)
        counts.setdefault(u.members[0][2], set()).add(len(ranks))
    assert counts == {"layer3.0": {13}, "layer3.1": {13}, "layer4.0": {14}, "layer4.1": {14}}
    assert max(m[3] or 0 for u in sens for m in u.members) < 512


def _imagenet_checkpoints(root, classes: int, seeds: int, ext: str = ".pth") -> None:
    """Randomly initialised ResNet-18s in torchvision's layout and ViT-Ti/16s in timm's (DeiT-wrapped), as the
    ImageNet space names them."""
    from timm.models.vision_transformer import VisionTransformer

    from sweep.models.imagenet_tv import reference

    (root / "models" / "imagenet").mkdir(parents=True, exist_ok=True)
    for s in range(seeds):
        torch.manual_seed(s)
        resnet = reference("tv_resnet18", classes).state_dict()
        torch.save(resnet, root / "models" / "imagenet" / f"resnet18_seed{s}{ext}")
        vit = VisionTransformer(num_classes=classes, embed_dim=192, depth=12, num_heads=3).state_dict()
        torch.save({"model": vit}, root / "models" / "imagenet" / f"vit_ti_16_seed{s}{ext}")


@pytest.mark.slow  # about 15 s of CPU on a 2-core x86-64 CPU
def test_imagenet_space_plans_the_papers_tests_once_its_checkpoints_are_in_place(tmp_path, monkeypatch):
    """`search_spaces/own_checkpoints/ding_tests_imagenet.yaml` (Balogh & Jelasity 2025 Tables 2-3, ImageNet
    rows): 5 ResNet-18s and 5 ViT-Ti/16s; 13 and 14 ranks on ResNet blocks 5-8, 16 on the ViT's last four
    blocks, specificity over every block; without its checkpoints it is refused naming the first file."""
    from sweep.config.space import load_space
    from tests.conftest import REPO

    path = REPO / "search_spaces" / "own_checkpoints" / "ding_tests_imagenet.yaml"
    monkeypatch.chdir(tmp_path)  # its paths are relative to where the command runs
    for part in ("train", "val"):
        (tmp_path / "data" / "imagenet" / part).mkdir(parents=True)
    with pytest.raises(SpecError, match=r"donors.r0.file"):
        load_space(path)
    _imagenet_checkpoints(tmp_path, 1000, 5)
    sweep = load_space(path)
    counts = {}
    for u in sweep.reptests:
        members = {(m[0], m[2]) for m in u.members}
        counts.setdefault((u.test, u.arch), set()).add(len(u.members) if u.test == "sensitivity" else len(members))
    assert counts == {
        ("sensitivity", "tv_resnet18"): {13, 14},
        ("specificity", "tv_resnet18"): {5 * 8},
        ("sensitivity", "vit_ti_16"): {16},
        ("specificity", "vit_ti_16"): {5 * 12},
    }
    assert len([u for u in sweep.reptests if u.test == "sensitivity"]) == 5 * 4 + 5 * 4


@pytest.mark.slow
def test_imagenet_space_runs_its_tests_on_a_small_image_folder(tmp_path, monkeypatch, registered):
    """The ImageNet space's donors, as it declares them (checkpoints of 3 classes here), through the zoo stage
    and one sensitivity and one specificity unit each, on a 3-class ImageNet folder at 224 px (read by the
    `imagenet` loader, registered as a 3-class dataset so that `plan` checks the checkpoints against 3 classes)."""
    import dataclasses

    import yaml
    from PIL import Image

    from sweep.registry import DATASETS
    from tests.conftest import REPO

    registered(DATASETS, "imagenet_3", dataclasses.replace(DATASETS["imagenet"], num_classes=3, train_pool=12, test=12))

    space = yaml.safe_load((REPO / "search_spaces" / "own_checkpoints" / "ding_tests_imagenet.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    for part in ("train", "val"):
        for c in range(3):
            folder = tmp_path / "data" / "imagenet" / part / f"n{c:08d}"
            folder.mkdir(parents=True)
            for k in range(4):
                pixels = np.random.default_rng(10 * c + k).integers(0, 256, (240, 260, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(folder / f"{k}.png")
    _imagenet_checkpoints(tmp_path, 3, 2)
    space["data"].update(dataset="imagenet_3", val_size=2)
    space["donors"] = {k: v for k, v in space["donors"].items() if k in ("r0", "r1", "v0", "v1")}
    small = {"samples": 10, "dm_samples": 10, "probe": {"train_size": 10, "epochs": 2, "lr": 0.01}}
    space["representation_tests"] = [
        dict(SENS, donors=["file:r0"], layers=["layer3.1"], ranks=[256, 8], **small),
        dict(SPEC, donors=["file:v0", "file:v1"], layers=["blocks.10", "blocks.11"], **small),
    ]
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path / "results", sweep.name)
    sweep_dir.create()
    cpu, data_root = torch.device("cpu"), str(tmp_path / "data")
    for d in sweep.donors.values():
        row = run_donor(d, sweep.donor_evals[d.name], sweep_dir, cpu, data_root=data_root)
        assert row["status"] == "done", row.get("error")
    for unit in sweep.reptests:
        row = run_reptest(unit, sweep_dir, cpu, data_root=data_root)
        assert row["status"] == "done", row.get("error")
    rows = analysis.load_reptests(sweep_dir.path)
    sens = rows[rows["test"] == "sensitivity"]
    assert sorted(sens["rank"].fillna(256)) == [8, 256]  # 256 channels: the full-rank member is the reference
    assert abs(sens.loc[sens["reference"], "d_cka"].item()) < 1e-6 and sens.loc[sens["rank"] == 8, "d_cka"].item() > 0
    spec = rows[rows["test"] == "specificity"]
    assert set(spec["layer"]) == {"blocks.10", "blocks.11"} and spec["d_pwcca"].notna().all()


@pytest.mark.parametrize("shape", [(3, 4, 5, 6), (3, 7, 5), (3, 9)])
def test_channel_rows_converted_in_one_copy_are_the_rows_converted(shape):
    """`_channel_rows(a, float64)` (the basis's one float64 copy) holds exactly the float32 rows converted."""
    from sweep.kinds.reptest.run import _channel_rows

    a = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    got = _channel_rows(a, torch.float64)
    assert got.dtype == torch.float64 and got.is_contiguous() and torch.equal(got, _channel_rows(a).double())
