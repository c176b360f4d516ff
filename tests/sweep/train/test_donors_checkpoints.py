"""Donor training keeps its state per epoch (Cianfarani et al. 2022 Section 5 needs every epoch's weights;
paper-scale donors train for 100-200 epochs): a run killed mid-training resumes from its last complete epoch
and ends with the weights of an uninterrupted run, and `checkpoint_every` keeps the chosen epochs' weights."""

import copy
import dataclasses

import pytest
import torch

from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.data.core import make_splits
from sweep.registry import KINDS
from sweep.store.results import open_root
from sweep.train.donors import TRAIN_STATE, epoch_checkpoint, train_donor
from tests.conftest import TINY_SPACE

pytestmark = pytest.mark.slow  # every test here trains a donor


class Killed(Exception):
    pass


def _donor(**changes):
    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["plain_a"].update(changes)
    sweep = parse_space(space)
    donor = sweep.donors["plain_a"]
    splits = make_splits(donor.data.dataset, 400, donor.data.val_size, donor.data.test_size)
    return donor, splits


@pytest.mark.parametrize("training", ["plain", "pgd"])
def test_a_killed_donor_resumes_and_ends_with_the_uninterrupted_weights(tmp_path, training):
    extra = {"eps": 0.1, "steps": 2} if training == "pgd" else {}
    donor, splits = _donor(training=training, epochs=3, augment=["crop"], **extra)
    cpu = torch.device("cpu")
    whole = train_donor(donor, splits, cpu)

    workdir = open_root(tmp_path / "zoo")

    def kill_after_epoch_2(m):
        if m.get("epoch") == 2 and m["phase"] == "zoo":
            raise Killed

    with pytest.raises(Killed):
        train_donor(donor, splits, cpu, kill_after_epoch_2, workdir)
    assert (workdir / TRAIN_STATE).exists()
    seen = []
    resumed = train_donor(donor, splits, cpu, seen.append, workdir)
    assert seen[0] == {"phase": "zoo_resumed", "epoch": 2, "epochs": 3}
    assert [m["epoch"] for m in seen[1:]] == [3]  # only the epoch left was trained
    # per epoch: validation loss and accuracy, and for PGD on its own attack (higher loss: the attack works)
    assert {"train_loss", "val_loss", "val_acc"} <= set(seen[-1])
    if training == "pgd":
        assert seen[-1]["val_adv_acc"] <= seen[-1]["val_acc"] and seen[-1]["val_adv_loss"] > seen[-1]["val_loss"]
    # exact by construction (the promise of resuming, on one machine and thread count): the same seeded steps in
    # the same process, the resumed run restoring the model, optimiser and RNG states saved after epoch 2
    for (name, a), (_, b) in zip(whole.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), name


def test_checkpoint_every_keeps_those_epochs_and_joins_the_donor_key(tmp_path):
    plain, _ = _donor(epochs=5)
    donor, splits = _donor(epochs=5, checkpoint_every=2)
    assert donor.kept_epochs == (2, 4, 5) and plain.kept_epochs == ()
    assert donor.donor_key != plain.donor_key
    assert dataclasses.replace(donor, checkpoint_every=None).donor_key == plain.donor_key  # unset: keys unchanged
    workdir = open_root(tmp_path / "zoo")
    model = train_donor(donor, splits, torch.device("cpu"), workdir=workdir)
    from sweep.store.results import load_torch

    for epoch in (2, 4, 5):
        assert load_torch(epoch_checkpoint(workdir, epoch))["epoch"] == epoch
    assert not epoch_checkpoint(workdir, 3).exists()
    final = load_torch(epoch_checkpoint(workdir, 5))["state_dict"]
    assert all(torch.equal(final[k], v) for k, v in model.state_dict().items())  # a copy of the same tensors: exact
    with pytest.raises(SpecError, match=r"^donors.plain_a.checkpoint_every: expected an integer >= 1"):
        _donor(checkpoint_every=0)


def test_l2_adversarial_training_needs_its_own_radius_and_trains():
    """`pgd_l2` (Cianfarani et al. 2022 Section 6's L2 threat model): an L2 radius must be given (the
    evaluation's L-inf eps is on another scale), the step defaults to 2.5 eps / steps, and training runs."""
    with pytest.raises(SpecError, match=r"^donors.plain_a.eps: expected the L2 radius"):
        _donor(training="pgd_l2")
    donor, splits = _donor(training="pgd_l2", eps=1.0, steps=4, epochs=1)
    assert donor.step_size == pytest.approx(2.5 * 1.0 / 4)
    seen = []
    train_donor(donor, splits, torch.device("cpu"), seen.append)
    assert seen[-1]["epoch"] == 1 and seen[-1]["train_loss"] > 0


def test_a_failure_on_the_training_images_fails_the_donor_row_and_names_it(tmp_path, monkeypatch):
    """Cianfarani et al. Table 1's training-set columns: an error measuring them is recorded (the row fails and is
    tried again on the next run), not swallowed with the columns left empty."""
    from sweep.kinds.donor import run as donor_kind
    from sweep.store.results import SweepDir

    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["plain_a"]["epochs"] = 1
    space["evaluation"]["n_eval_robust"] = 0
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    real, calls = donor_kind._accuracies, []

    def second_call_fails(*args, **kwargs):  # the test images first, then the training images
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return real(*args, **kwargs)

    monkeypatch.setattr(donor_kind, "_accuracies", second_call_fails)
    ev = sweep.donor_evals["plain_a"]
    row = donor_kind.run_donor(sweep.donors["plain_a"], ev, sweep_dir, torch.device("cpu"), train_accuracy=True)
    assert row["status"] == "failed" and row["error"] == "accuracy on the training images: RuntimeError: boom"
    monkeypatch.setattr(donor_kind, "_accuracies", real)
    row = donor_kind.run_donor(sweep.donors["plain_a"], ev, sweep_dir, torch.device("cpu"), train_accuracy=True)
    assert row["status"] == "done" and 0.0 <= row["train_clean_acc"] <= 1.0


def test_training_images_are_measured_only_when_the_space_asks(tmp_path, monkeypatch):
    """Only Cianfarani et al. Table 1 reads a donor's accuracy on its training images (`evaluation.train_accuracy`);
    without it the donor is measured on its test images alone. Asked for later, a recorded row without them is
    measured again (and one with them is not)."""
    from sweep.kinds.donor import run as donor_kind
    from sweep.store.results import SweepDir

    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["plain_a"]["epochs"] = 1
    space["evaluation"]["n_eval_robust"] = 0
    sweep = parse_space(space)
    assert not sweep.evaluation.train_accuracy
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    real, calls = donor_kind._accuracies, []
    monkeypatch.setattr(donor_kind, "_accuracies", lambda *a, **k: calls.append(len(a[2])) or real(*a, **k))
    ev, donor = sweep.donor_evals["plain_a"], sweep.donors["plain_a"]
    row = donor_kind.run_donor(donor, ev, sweep_dir, torch.device("cpu"))
    assert row["status"] == "done" and row.get("train_clean_acc") is None and len(calls) == len(ev)
    calls.clear()
    asked = parse_space(dict(space, evaluation=dict(space["evaluation"], train_accuracy=True)))
    (work,) = [w for w in KINDS["donor"].units(asked).values() if w.donor.name == "plain_a"]
    assert work.train_accuracy
    row = donor_kind.run_donor(donor, ev, sweep_dir, torch.device("cpu"), train_accuracy=True)
    assert row["status"] == "done" and 0.0 <= row["train_clean_acc"] <= 1.0 and len(calls) == 2  # test, train
    calls.clear()
    assert donor_kind.run_donor(donor, ev, sweep_dir, torch.device("cpu"), train_accuracy=True)["skipped"]
    assert calls == []


def test_training_numerics_join_the_donor_key_only_when_set():
    plain, _ = _donor(epochs=1)
    fast, splits = _donor(epochs=1, precision="bf16", channels_last=True)
    assert (fast.precision, fast.channels_last) == ("bf16", True) and fast.donor_key != plain.donor_key
    assert dataclasses.replace(fast, precision=None, channels_last=None).donor_key == plain.donor_key
    assert _donor(epochs=1, precision="fp32", channels_last=False)[0].donor_key == plain.donor_key  # the defaults
    model = train_donor(fast, splits, torch.device("cpu"))  # bf16 autocast on the CPU too
    conv = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)][-1]  # many input channels
    assert conv.weight.dtype == torch.float32 and conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert all(torch.isfinite(p).all() for p in model.parameters())
    with pytest.raises(SpecError, match=r"^donors.plain_a.precision: expected one of"):
        _donor(precision="fp16")
