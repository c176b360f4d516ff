"""A donor whose checkpoint finds the disk full (`sweep.kinds.donor.run.run_donor`): no checkpoint, no donor row
(not recorded failed: the trials that read it are not blocked), `DiskFull` raised naming the zoo's folder; run
again with space freed, it trains, and is recorded once. A real, tiny training on the digits (about 2 s)."""

from __future__ import annotations

import pytest
import torch

from sweep.config.space import parse_space
from sweep.kinds.donor.run import run_donor
from sweep.kinds.donor.units import donor_part
from sweep.store.results import SweepDir, read_status
from sweep.store.storage import DiskFull


def test_a_donor_checkpoint_on_a_full_disk_records_nothing_and_trains_once_later(tiny_space, tmp_path, full_disk):
    tiny_space["donors"]["plain_a"]["epochs"] = 1
    tiny_space["data"]["train_size"] = 200
    tiny_space["evaluation"]["n_eval_robust"] = 0
    sweep = parse_space(tiny_space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    donor, evals = sweep.donors["plain_a"], sweep.donor_evals["plain_a"]
    ckpt, parts = sweep_dir.checkpoint(donor.donor_key), [donor_part(sweep_dir, donor, ev) for ev in evals]
    full_disk(ckpt.name, times=1)  # the failed rows written next would fit: none is
    with pytest.raises(DiskFull) as got:
        run_donor(donor, evals, sweep_dir, torch.device("cpu"))
    assert got.value.folder == str(ckpt.parent) and got.value.needed > 10_000  # a network's weights
    assert not ckpt.exists() and not [f for f in ckpt.parent.rglob("*") if f.name.startswith(".tmp-")]
    assert all(read_status(p) is None for p in parts)  # pending: nothing recorded failed
    full_disk(None)
    assert run_donor(donor, evals, sweep_dir, torch.device("cpu"))["status"] == "done"
    assert [read_status(p) for p in parts] == ["done"] * len(parts) and ckpt.exists()
    assert run_donor(donor, evals, sweep_dir, torch.device("cpu")).get("skipped")  # once
