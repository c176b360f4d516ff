"""OOD detection of stitched representations (Balogh & Jelasity 2025 Section 4): AUROC, the detector, per-trial
metric."""

import copy
import struct

import pandas as pd
import pytest
import torch

from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.kinds.donor.run import run_donor
from sweep.kinds.trial.run import run_trial
from sweep.measures.ood import auroc, energy, train_detector
from sweep.store.results import SweepDir
from tests.conftest import TINY_SPACE


def test_auroc_matches_its_definition_with_ties():
    neg, pos = torch.tensor([0.0, 1.0, 2.0]), torch.tensor([1.0, 3.0])
    # pairs (pos > neg) + 0.5 ties: 3 -> 3 wins; 1 -> beats 0, ties 1: 1.5; total 4.5 of 6
    assert auroc(neg, pos) == pytest.approx(4.5 / 6)
    assert auroc(pos, pos) == pytest.approx(0.5)
    assert auroc(torch.zeros(4), torch.ones(4)) == 1.0
    with pytest.raises(ValueError):
        auroc(torch.zeros(0), pos)


def test_energy_detector_separates_outliers_after_outlier_exposure():
    gen = torch.Generator().manual_seed(0)
    y = torch.randint(0, 3, (600,), generator=gen)
    acts_in = torch.randn(600, 4, 5, 5, generator=gen) * 0.2
    acts_in[torch.arange(600), y] += 1.0
    acts_out = torch.randn(600, 4, 5, 5, generator=gen) * 2.0 + 3.0
    det = train_detector(acts_in[:500], y[:500], acts_out[:500], 3, epochs=3, oe_epochs=3)
    with torch.no_grad():
        e_in, e_out = energy(det(acts_in[500:])), energy(det(acts_out[500:]))
    assert auroc(e_in, e_out) > 0.95


def _space():
    space = copy.deepcopy(TINY_SPACE)
    space["stitching"].update(
        stitch_points=["layer2.0"],
        end_points=["layer2.0", "layer3.1"],
        objectives=["dm", "tlm"],
        ood={"outliers": ["noise"], "train_size": 600, "epochs": 2, "oe_epochs": 2, "samples": 200},
    )
    space["evaluation"]["n_eval_robust"] = 0
    return space


@pytest.mark.slow
def test_ood_auroc_per_trial_is_recorded_and_detectors_are_cached(tmp_path):
    sweep = parse_space(_space())
    assert all(t.ood_outliers == ("noise",) and t.ood_samples == 200 for t in sweep.trials)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    run_donor(sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, torch.device("cpu"))
    rows = {(t.objective, t.end_point): run_trial(t, sweep_dir) for t in sweep.trials}
    assert all(r["status"] == "done" for r in rows.values()), rows
    same = rows[("dm", "layer2.0")]
    assert same["ood_auroc"] == pytest.approx(0.5, abs=0.05)  # DM self-stitch: the same activations
    assert all(0.0 <= r["ood_auroc"] <= 1.0 for r in rows.values())
    detectors = list((sweep_dir.zoo(sweep.trials[0].end_key) / "ood").glob("*.pt"))
    assert len(detectors) == 2  # one per end layer, shared by the objectives


def test_bad_ood_settings_are_refused():
    space = _space()
    space["stitching"]["ood"]["outliers"] = ["cifar10"]
    with pytest.raises(SpecError, match=r"^stitching.ood.outliers\[0\]: expected 'noise' or a dataset other than"):
        parse_space(space)
    space["stitching"]["ood"]["outliers"] = ["digits"]  # the trial's own data is not an outlier set
    with pytest.raises(SpecError, match=r"^stitching.ood.outliers\[0\]"):
        parse_space(space)
    space["stitching"]["ood"] = {"outliers": ["noise"], "samples": 100_000}
    with pytest.raises(SpecError, match=r"^stitching.ood.samples: expected at most the 359 test images"):
        parse_space(space)


@pytest.mark.slow
def test_a_trial_records_the_energies_its_auroc_comes_from_and_the_report_draws_them(tmp_path):
    """Balogh & Jelasity 2025 Fig. 1c: a trial with OOD detection keeps the per-sample energies of target,
    stitched and outlier activations; the AUROC recomputed from them by counting pairs is the recorded one."""
    import analysis
    from analysis.report.write import write_report

    space = _space()
    space["stitching"].update(end_points=["layer2.0"], objectives=["dm"])
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    run_donor(sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, torch.device("cpu"))
    (trial,) = sweep.trials
    row = run_trial(trial, sweep_dir)
    energies = analysis.load(sweep_dir.path)["energies"]
    assert energies.groupby("kind").size().to_dict() == {"outlier": 200, "stitched": 200, "target": 200}
    target = energies.query("kind == 'target'")["energy"].to_numpy()
    stitched = energies.query("kind == 'stitched'")["energy"].to_numpy()
    wins = (stitched[:, None] > target[None, :]).sum() + 0.5 * (stitched[:, None] == target[None, :]).sum()
    assert row["ood_auroc"] == pytest.approx(wins / (len(target) * len(stitched)))
    # the chart holds, per panel and series, exactly the recorded energies of its kind
    from analysis.charts.energies import energy_density_chart, energy_rows

    data = analysis.load(sweep_dir.path)
    spec = energy_density_chart(energy_rows(data["trials"], energies)).to_dict()
    drawn = pd.DataFrame(next(iter(spec["datasets"].values())))
    assert drawn["panel"].nunique() == 2 and spec["facet"]["row"]["field"] == "panel"
    series = drawn.groupby("series")["energy"].apply(sorted).to_dict()
    outlier = energies.query("kind == 'outlier'")["energy"]
    want = {"layer2.0, in-distribution": target, "layer2.0, outliers (OOD)": outlier}
    want[f"from {row['front_point']}"] = stitched
    assert set(series) == set(want)
    for name, values in want.items():
        assert series[name] == pytest.approx(sorted(values)), name
    write_report(sweep_dir.path, tmp_path / "report")
    png = (tmp_path / "report" / "energy_densities.png").read_bytes()
    width, height = struct.unpack(">II", png[16:24])  # the PNG's IHDR: at least the spec's panel and two rows
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and width >= 520 and height >= 2 * 150


@pytest.mark.slow  # about 12-18 s on a 2-core x86-64 CPU
def test_the_papers_detectors_read_activations_and_survive_the_cache(tmp_path):
    """Section 4.1's detectors: a ResNet-18 reading conv activations, a ViT-Ti without embedding reading tokens;
    trained briefly, saved and loaded again they give the same energies. `detector: paper` is part of a trial's
    identity (the small detector keeps the identities trials had before)."""
    from sweep.measures.ood import Detector, load_or_train
    from sweep.store.storage import open_root

    gen = torch.Generator().manual_seed(0)
    for shape in ((16, 4, 4), (5, 32)):
        acts, y = torch.randn(40, *shape, generator=gen), torch.randint(0, 3, (40,), generator=gen)
        det = train_detector(
            acts, y, torch.randn(40, *shape, generator=gen) + 2, 3, epochs=1, oe_epochs=1, kind="paper"
        )
        net = det.net
        assert type(net).__name__ == ("ResNet" if len(shape) == 3 else "_vit_ti")
        path = tmp_path / f"det-{len(shape)}.pt"
        first = load_or_train(open_root(path), lambda det=det: det)
        again = load_or_train(open_root(path), lambda: pytest.fail("trained twice"))
        assert isinstance(again, Detector) and again.kind == "paper"
        with torch.no_grad():
            torch.testing.assert_close(energy(again(acts)), energy(first(acts)))
    space = _space()
    space["stitching"]["ood"]["detector"] = "paper"
    paper = parse_space(space).trials
    assert all(t.ood_detector == "paper" for t in paper)
    assert {t.trial_id for t in paper}.isdisjoint(t.trial_id for t in parse_space(_space()).trials)


def test_the_300k_random_images_are_read_from_their_file_and_never_downloaded(tmp_path):
    import numpy as np

    from sweep.kinds.trial.measures import RANDOM_300K, outlier_images

    images = np.random.default_rng(0).integers(0, 256, (10, 32, 32, 3), dtype=np.uint8)
    np.save(tmp_path / RANDOM_300K, images)
    got = outlier_images(("random300k",), 4, torch.zeros(3, 32, 32), str(tmp_path), download=False)
    torch.testing.assert_close(got, torch.from_numpy(images[:4]).permute(0, 3, 1, 2).float() / 255)
    with pytest.raises(FileNotFoundError, match="not downloaded"):
        outlier_images(("random300k",), 4, torch.zeros(3, 32, 32), str(tmp_path / "none"), download=True)
    space = _space()  # the digits are 1 x 28 x 28: the 300K Random Images do not fit
    space["stitching"]["ood"]["outliers"] = ["random300k"]
    with pytest.raises(SpecError, match=r"ood.outliers\[0\]"):
        parse_space(space)
