"""Layer freezing during training (Cianfarani et al. 2022 D.5, `freeze:` of a zoo donor): after its epoch a
stage and everything before it stop changing (weights and BatchNorm statistics), deeper stages go on, the
setting joins the donor key only when given, and a killed run resumes into the same weights."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.data.core import make_splits
from sweep.store.results import load_torch, open_root
from sweep.train.donors import epoch_checkpoint, train_donor
from tests.conftest import TINY_SPACE

CPU = torch.device("cpu")
STAGGERED = [{"through": "layer1.1", "after": 1}, {"through": "layer2.1", "after": 3}]


def _donor(**changes):
    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["plain_a"].update(changes)
    donor = parse_space(space).donors["plain_a"]
    return donor, make_splits(donor.data.dataset, 300, donor.data.val_size, donor.data.test_size)


def _stage(key: str) -> str:
    return key.split(".")[1]  # "stages.layer1_1.conv1.weight" -> "layer1_1"


@pytest.mark.slow
def test_frozen_stages_stop_changing_after_their_epoch_and_deeper_ones_go_on(tmp_path):
    donor, splits = _donor(epochs=4, checkpoint_every=1, freeze=STAGGERED)
    assert donor.freeze == (("layer1.1", 1), ("layer2.1", 3))
    workdir = open_root(tmp_path / "zoo")
    train_donor(donor, splits, CPU, workdir=workdir)
    weights = {e: load_torch(epoch_checkpoint(workdir, e))["state_dict"] for e in (1, 2, 3, 4)}
    first = {"stem", "layer1_0", "layer1_1"}
    second = {"layer2_0", "layer2_1"}
    for key, w in weights[1].items():
        stage = _stage(key)
        untouched = [e for e in (2, 3, 4) if torch.equal(weights[e][key], w)]  # copies, never computed on: exact
        if stage in first and not key.endswith("num_batches_tracked"):
            assert untouched == [2, 3, 4], key
        if stage in second and w.is_floating_point() and w.numel() > 1:
            assert not torch.equal(weights[3][key], w) and torch.equal(weights[4][key], weights[3][key]), key
    deeper = [k for k in weights[3] if _stage(k) not in first | second and weights[3][k].is_floating_point()]
    assert deeper and any(not torch.equal(weights[4][k], weights[3][k]) for k in deeper)


def test_freezing_joins_the_key_only_when_set_and_bad_settings_name_the_field():
    plain, _ = _donor(epochs=4)
    frozen, _ = _donor(epochs=4, freeze=STAGGERED)
    assert frozen.donor_key != plain.donor_key
    assert dataclasses.replace(frozen, freeze=None).donor_key == plain.donor_key
    bad = [
        ([{"through": "layer9", "after": 1}], "donors.plain_a.freeze[0].through"),
        ([{"through": "layer1.1", "after": 4}], "donors.plain_a.freeze[0].after"),
        ([{"through": "layer2.1", "after": 1}, {"through": "layer1.1", "after": 2}], "donors.plain_a.freeze"),
        ([{"through": "layer1.1"}], "donors.plain_a.freeze[0].after"),
    ]
    for freeze, field in bad:
        with pytest.raises(SpecError) as err:
            _donor(epochs=4, freeze=freeze)
        assert err.value.field == field


@pytest.mark.slow
def test_a_killed_freezing_donor_resumes_into_the_uninterrupted_weights(tmp_path):
    donor, splits = _donor(epochs=3, freeze=[{"through": "layer1.1", "after": 1}])
    whole = train_donor(donor, splits, CPU)

    class Killed(Exception):
        pass

    def kill_after_epoch_2(m):
        if m.get("epoch") == 2 and m["phase"] == "zoo":
            raise Killed

    workdir = open_root(tmp_path / "zoo")
    with pytest.raises(Killed):
        train_donor(donor, splits, CPU, kill_after_epoch_2, workdir)
    resumed = train_donor(donor, splits, CPU, workdir=workdir)
    # exact by construction, as for any resumed donor: the same seeded steps in one process, the frozen stages
    # frozen again on resuming
    for (name, a), (_, b) in zip(whole.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), name
