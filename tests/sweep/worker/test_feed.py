"""The donor stage's pass that fills the trials' frozen halves (`sweep.worker.feed`, `sweep.kinds.donor.run`): its
activations are those of computing each front apart, a trial reading them records the rows of a trial that
computes them, and its front then computes none of the test images."""

import copy
import dataclasses
import shutil

import pandas as pd
import pytest
import torch

from sweep.config.space import parse_space
from sweep.data.core import make_splits
from sweep.kinds.donor.run import run_donor
from sweep.kinds.donor.units import donor_part
from sweep.kinds.trial.fills import trial_fills
from sweep.kinds.trial.run import run_trial
from sweep.models.base import split
from sweep.models.resnet import resnet_tiny
from sweep.registry import KINDS
from sweep.store.results import SweepDir, recorded_row
from sweep.worker import activations, cache
from sweep.worker.activations import compute
from sweep.worker.feed import LOGITS, staged
from sweep.worker.splits import worker_splits
from tests.conftest import TINY_SPACE

CPU = torch.device("cpu")
VOLATILE = ["hostname", "device", "finished_at"]


@pytest.fixture
def settings(tmp_path):
    def set_(**env):
        return cache.configure({cache.DIR_ENV: str(tmp_path / "node"), **env})  # a new folder: a new, empty cache

    yield set_
    cache.configure()


@pytest.mark.parametrize("channels_last", [False, True])
def test_one_pass_gives_each_fronts_activations_and_the_logits(channels_last):
    """600 images: two whole chunks and a part one. Each point's activations and the logits, chunk by chunk, are
    what computing that front (the whole network) apart on the chunk grid gives, in its memory layout: the same
    operations on the same batches (bit for bit on the CPUs measured; asserted to float rounding, while a wrong
    point, chunk or image order moves values by far more)."""
    torch.manual_seed(0)
    model = resnet_tiny(in_channels=1, num_classes=10, mean=(0.5,), std=(0.5,), image_size=16).eval()
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    x = torch.rand(600, 1, 16, 16)
    points = {"layer1.0", "layer3.1", "penultimate"}
    got = list(staged(model, x, CPU, points, channels_last=channels_last, logits=True))
    assert len(got) == 3 and [len(c[LOGITS]) for c in got] == [250, 250, 100]
    for point in [*points, LOGITS]:
        front = model if point == LOGITS else split(model, point)[0]
        for i, chunk in enumerate(got):
            alone = compute(front, x[250 * i : 250 * (i + 1)], CPU, channels_last=channels_last)
            torch.testing.assert_close(chunk[point], alone, rtol=1e-6, atol=1e-7, msg=point)
            assert chunk[point].stride() == alone.stride(), point


def _space(**stitching):
    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["plain_a"]["epochs"] = 1
    space["stitching"].update(objectives=["dm"], **stitching)
    return parse_space(space)


def test_the_plan_fills_only_the_halves_trials_read_on_the_donors_images():
    """The front at the trial's precision (its clean evaluation); front and end in fp32 where indices read them;
    nothing where no trial reads a donor, for a noise sender, or where the fit moves the front's statistics."""
    sweep = _space(stitch_points=["layer1.0", "layer3.1"])
    work = KINDS["donor"].units(sweep)["plain_a"]
    assert {(f.point, f.precision) for f in work.fills} == {("layer1.0", "fp32"), ("layer3.1", "fp32")}
    ev = sweep.donor_evals["plain_a"][0]
    assert all(f.ev == ev and f.data[0] == "digits" for f in work.fills)
    t = sweep.trials[0]
    ends = [h for ref, h in trial_fills(dataclasses.replace(t, indices=("cka",), end_point="layer3.1"))]
    assert {h.point for h in ends} == {t.front_point, "layer3.1"}
    assert trial_fills(dataclasses.replace(t, donor_bn="update")) == []  # no indices: read again after the fit
    assert trial_fills(dataclasses.replace(t, noise_sigma=1.0)) == []
    alone = dict(copy.deepcopy(TINY_SPACE), stitching=None)
    alone.pop("stitching")
    assert all(not w.fills for w in KINDS["donor"].units(parse_space(alone)).values())


def test_a_trial_reading_halves_the_donor_stage_filled_records_the_same_rows(settings, tmp_path, monkeypatch):
    """The donor stage's pass fills the trials' fronts on the test images: the trials record the rows of trials
    that compute them (to float rounding), and their fronts compute none of the test images: in the worker
    that ran the donor stage, none at all; in another (memory empty, the node's files) only the 2-image size
    probe. Without fills the front computes the whole test part."""
    sweep = _space(stitch_points=["layer1.0", "layer3.1"], indices=["cka"], similarity_samples=300)
    work = KINDS["donor"].units(sweep)["plain_a"]
    trials = [dataclasses.replace(t, n_eval_robust=0) for t in sweep.trials]
    test_x = make_splits("digits", None, 200, None).test_x
    counted = []
    real = activations.compute

    def counting(module, x, *args, **kwargs):  # images of the test part through a frozen half
        own = worker_splits("digits", None, 200, None, CPU).test_x  # the trials' split, as this worker keeps it
        if x.untyped_storage().data_ptr() == own.untyped_storage().data_ptr():
            counted.append(len(x))
        return real(module, x, *args, **kwargs)

    monkeypatch.setattr(activations, "compute", counting)

    def run(name, fills, clear=False):
        c = settings(**{cache.DIR_ENV: str(tmp_path / f"node-{name}")})  # a node of its own, memory empty
        d = SweepDir(tmp_path / name, sweep.name)
        d.create()
        if name != "computed":  # the donor trained once
            shutil.copytree(str(SweepDir(tmp_path / "computed", sweep.name).root / "zoo"), str(d.root / "zoo"))
        row = run_donor(work.donor, work.evaluations, d, CPU, predictions=True, fills=fills)
        assert row["status"] == "done", row.get("error")
        donor_rows.append(row)
        if clear:  # another worker of the node: the node's files, nothing in memory
            c.clear()
        counted.clear()
        rows = [run_trial(t, d, device=CPU) for t in trials]
        assert all(r["status"] == "done" for r in rows), [r.get("error") for r in rows]
        return pd.DataFrame(rows).drop(columns=VOLATILE).filter(regex="^(?!time_)"), sum(counted)

    donor_rows = []
    computed, n_computed = run("computed", ())
    same_worker, n_same = run("fed", work.fills)
    other_worker, n_other = run("fed-elsewhere", work.fills, clear=True)
    assert n_computed >= 2 * len(test_x) and n_same == 0 and n_other == 2 * 2  # two fronts: one probe each
    pd.testing.assert_frame_equal(same_worker, computed, check_exact=False, rtol=1e-5, atol=1e-6)
    pd.testing.assert_frame_equal(other_worker, computed, check_exact=False, rtol=1e-5, atol=1e-6)
    # the donor's clean accuracy from the pass's logits is the one `predict` gives (no trial reading it)
    plain = SweepDir(tmp_path / "plain", sweep.name)
    plain.create()
    shutil.copytree(str(SweepDir(tmp_path / "computed", sweep.name).root / "zoo"), str(plain.root / "zoo"))
    alone = run_donor(work.donor, work.evaluations, plain, CPU)
    assert {r["clean_acc"] for r in donor_rows} == {alone["clean_acc"]}  # counts of images: exact


def test_two_evaluations_of_the_same_images_take_one_pass_through_the_donor(settings, tmp_path, monkeypatch):
    """The donor's own test set of a nominal size its files do not hold, and a trial's that asks for all they
    hold: the same images, one pass (which fills the trials' halves), and each row the accuracy `predict` gives."""
    import sweep.kinds.donor.run as donor_kind

    settings()
    sweep = _space(stitch_points=["layer1.0"])
    work = KINDS["donor"].units(sweep)["plain_a"]
    (own,) = work.evaluations
    nominal = dataclasses.replace(own, test_size=own.test_size + 1000)  # more than the files hold
    passes = []
    real = donor_kind.feed

    def counting(model, x, device, fills, logits):
        passes.append((len(x), len(fills)))
        return real(model, x, device, fills, logits)

    monkeypatch.setattr(donor_kind, "feed", counting)
    rows = {}
    for name, kwargs in (("alone", {}), ("fed", {"predictions": True, "fills": work.fills})):
        d = SweepDir(tmp_path / name, sweep.name)
        d.create()
        if name == "fed":  # the donor trained once
            shutil.copytree(str(SweepDir(tmp_path / "alone", sweep.name).root / "zoo"), str(d.root / "zoo"))
        run_donor(work.donor, (nominal, own), d, CPU, **kwargs)
        rows[name] = [recorded_row(donor_part(d, work.donor, ev)) for ev in (nominal, own)]
    assert passes == [(own.test_size, 1)]  # one pass for both evaluations, filling the trial's front
    accuracy = {r["clean_acc"] for r in rows["alone"]}
    assert len(accuracy) == 1 and [r["clean_acc"] for r in rows["fed"]] == [*accuracy] * 2  # counts: exact
    assert {r["test_size"] for r in rows["fed"]} == {nominal.test_size, own.test_size}
