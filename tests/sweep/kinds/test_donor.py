"""The donor unit's own evaluation: whether the donor is at chance is judged on the test images its split
holds, not on the nominal `test_size` (1,000 real images recorded as 10,000 would move a 10-class threshold
from 12.85% to 10.9%)."""

import copy
import dataclasses

import torch

from sweep.config.space import parse_space
from sweep.kinds.donor import run as donor_kind
from sweep.measures.chance import at_chance
from sweep.store.results import SweepDir
from tests.conftest import TINY_SPACE


def test_at_chance_is_judged_on_the_images_the_split_holds(tmp_path, monkeypatch):
    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["plain_a"]["epochs"] = 1
    space["data"]["train_size"] = 200
    space["evaluation"]["n_eval_robust"] = 0
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    (ev,) = sweep.donor_evals["plain_a"]
    ev = dataclasses.replace(ev, test_size=10_000)  # the nominal size ...
    real = donor_kind.worker_test_images

    def thousand(name, test_size, **where):  # ... of a test set whose files hold 1,000 images
        x, y = real(name, None, **where)
        return x[:1000], y[:1000]

    monkeypatch.setattr(donor_kind, "worker_test_images", thousand)
    monkeypatch.setattr(donor_kind, "_accuracies", lambda *args: (0.12, None))  # between the two thresholds
    assert at_chance(0.12, 10, 1000) and not at_chance(0.12, 10, 10_000)  # so the count decides
    row = donor_kind.run_donor(sweep.donors["plain_a"], (ev,), sweep_dir, torch.device("cpu"))
    assert row["status"] == "done", row.get("error")
    assert row["at_chance"] is True
