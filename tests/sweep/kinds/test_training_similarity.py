"""CKA across training epochs (Cianfarani et al. 2022 Figs 6, 25): a donor trained with `checkpoint_every`
keeps those epochs' weights; a unit gives every point's epoch x epoch CKA (symmetric, 1 on the diagonal) and
the report draws the curves against the final epoch and the matrices."""

import copy

import numpy as np
import pandas as pd
import pytest
import torch

import analysis
from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.data.core import make_splits
from sweep.kinds.base import RunContext
from sweep.kinds.donor.run import run_donor
from sweep.kinds.training_similarity.run import epoch_weights, run_training_similarity
from sweep.measures.similarity import MinibatchCKA, minibatches
from sweep.models.features import features
from sweep.store.results import SweepDir
from sweep.worker.zoo import load_donor
from tests.conftest import TINY_SPACE


def _space(entry: dict, **donor) -> dict:
    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["plain_a"].update(donor)
    del space["stitching"]
    space["evaluation"]["n_eval_robust"] = 0
    space["training_similarity"] = [entry]
    return space


ENTRY = {"name": "plain", "donors": ["zoo:plain_a"], "images": 120, "batch_size": 40, "passes": 2}


def test_a_donor_without_kept_epochs_is_refused():
    with pytest.raises(SpecError, match=r"^training_similarity\[0\]\.donors\[0\]: expected a zoo donor trained with"):
        parse_space(_space(ENTRY))
    (unit,) = parse_space(_space(ENTRY, epochs=4, checkpoint_every=2)).units["training_similarity"]
    assert unit.epochs == (2, 4) and len(unit.points) == 6


def _separate_models(unit, ctx, states, donor) -> np.ndarray:
    """The unit's CKA the way that held every kept epoch's model at once and every point's activations of a
    batch: (E, E, P)."""
    models = []
    for state in states:
        model = load_donor(ctx.sweep_dir, donor.donor_key, torch.device("cpu"))
        model.load_state_dict(state)
        models.append(model.eval())
    splits = make_splits(donor.data.dataset, donor.data.train_size, donor.data.val_size, donor.data.test_size)
    x = splits.test_x[: unit.images]
    accs = [MinibatchCKA() for _ in unit.points]
    for _, idx in minibatches(len(x), unit.batch_size, unit.passes, unit.seed):
        with torch.no_grad():
            per_model = [features(m, unit.points)(x[idx]) for m in models]
        for k, acc in enumerate(accs):
            reps = [acts[k] for acts in per_model]
            acc.update(reps, reps)
    return np.stack([acc.value().numpy() for acc in accs], axis=-1)


@pytest.mark.slow
def test_epoch_by_epoch_cka_of_a_trained_donor(tmp_path):
    space = _space(dict(ENTRY, points=["layer1.0", "layer3.1"]), epochs=4, checkpoint_every=1)
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    assert (
        run_donor(
            sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, torch.device("cpu"), train_accuracy=True
        )["status"]
        == "done"
    )
    (unit,) = sweep.units["training_similarity"]
    ctx = RunContext(sweep_dir, torch.device("cpu"))
    states = epoch_weights(unit, ctx)  # on the host; the last kept epoch is the finished donor
    final = analysis.load_donors(sweep_dir.path)
    assert len(states) == 4 and final["status"].eq("done").all()
    assert all(t.device.type == "cpu" for t in states[0].values())
    assert run_training_similarity(unit, ctx)["status"] == "done"
    rows = analysis.read_table(sweep_dir.path, "training_similarity").to_pandas()
    expected = _separate_models(unit, ctx, states, sweep.donors["plain_a"])
    for point, d in rows.groupby("point"):
        m = d.pivot(index="epoch_a", columns="epoch_b", values="cka").to_numpy()
        assert m.shape == (4, 4) and np.allclose(np.diag(m), 1.0, atol=1e-9) and np.allclose(m, m.T, atol=1e-9)
        assert (m[:-1, -1] < 1.0 - 1e-6).all(), point  # weights moved between epochs
        # one model taking each epoch's weights in turn gives what a model per epoch gives (the same float64
        # Grams of the same activations: only summation order could differ)
        assert np.allclose(m, expected[:, :, unit.points.index(point)], atol=1e-9), point

    from analysis.report.write import write_report

    index = write_report(sweep_dir.path, tmp_path / "report")
    assert "CKA with the final epoch" in index.read_text()
    table = pd.read_csv(tmp_path / "report" / "donor_generalisation.csv")  # Cianfarani et al. Table 1
    row = table.iloc[0]
    assert row["donor"] == "plain_a" and 0.5 < row["train_clean_acc"] <= 1.0 and 0.5 < row["clean_acc"] <= 1.0
    donor = sweep.donors["plain_a"]
    splits = make_splits(donor.data.dataset, donor.data.train_size, donor.data.val_size, donor.data.test_size)
    n = len(splits.test_y)  # as many training images as the donor's own evaluation has test images
    model = load_donor(sweep_dir, donor.donor_key, torch.device("cpu"))
    with torch.no_grad():
        right = (model(splits.train_x[:n]).argmax(1) == splits.train_y[:n]).float().mean().item()
    assert row["train_clean_acc"] == pytest.approx(right, abs=1e-6)
    donor_curves = pd.read_csv(tmp_path / "report" / "donor_curves.csv").set_index(["epoch", "metric"])["value"]
    assert set(donor_curves.index.get_level_values("epoch")) == {1, 2, 3, 4}
    assert {"train_loss", "val_loss", "val_acc"} <= set(donor_curves.index.get_level_values("metric"))
    # the last epoch's validation accuracy is the finished donor's on the validation images
    with torch.no_grad():
        val_right = (model(splits.val_x).argmax(1) == splits.val_y).float().mean().item()
    assert donor_curves[(4, "val_acc")] == pytest.approx(val_right, abs=1e-6)
    curves = pd.read_csv(tmp_path / "report" / "cka_epochs.csv")
    assert set(curves["epoch_a"]) == {1, 2, 3, 4} and (curves.loc[curves["epoch_a"] == 4, "cka"] > 1 - 1e-9).all()


@pytest.mark.slow
def test_kept_epochs_in_float16_are_the_trained_weights_rounded(tmp_path):
    """`keep_dtype: float16` stores each kept epoch's floating-point weights in float16 (the batch count stays an
    integer) and joins the donor's key; training itself is unchanged, so the last kept epoch is the finished
    donor's weights rounded to float16. Without kept epochs the field is refused."""
    with pytest.raises(SpecError, match=r"^donors.plain_a.keep_dtype: expected checkpoint_every set beside it"):
        parse_space(_space(ENTRY, epochs=2, keep_dtype="float16"))
    plain = parse_space(_space(ENTRY, epochs=2, checkpoint_every=1))
    assert parse_space(_space(ENTRY, epochs=2, checkpoint_every=1, keep_dtype="float32")).donors == plain.donors
    sweep = parse_space(_space(ENTRY, epochs=2, checkpoint_every=1, keep_dtype="float16"))
    donor = sweep.donors["plain_a"]
    assert donor.donor_key != plain.donors["plain_a"].donor_key
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    assert run_donor(donor, sweep.donor_evals["plain_a"], sweep_dir, torch.device("cpu"))["status"] == "done"
    (unit,) = sweep.units["training_similarity"]
    ctx = RunContext(sweep_dir, torch.device("cpu"))
    kept = epoch_weights(unit, ctx)[-1]
    final = load_donor(sweep_dir, donor.donor_key, torch.device("cpu")).state_dict()
    for name, value in final.items():
        if value.is_floating_point():
            assert kept[name].dtype == torch.float16 and torch.equal(kept[name], value.half()), name
        else:
            assert torch.equal(kept[name], value), name
    assert run_training_similarity(unit, ctx)["status"] == "done"
