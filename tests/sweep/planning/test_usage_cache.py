"""`du` and `prune --cache` on two sweeps under one root sharing one node cache folder, their files written and
recorded through the cache's own API (no training): `du` tells this sweep's entries apart from the rest, and
`prune --cache` removes only this sweep's entries that no other sweep's record lists."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch

from sweep.cli import main
from sweep.planning.usage import human
from sweep.store.layout import SPACE_FILE
from sweep.worker import cache

SPACE = """
name: {name}
data: {{dataset: digits, train_size: 64, val_size: 16, test_size: 32}}
donors:
  a: {{arch: resnet_tiny, training: plain, epochs: 1, lr: 0.1, seed: 0}}
"""


@pytest.fixture
def two_sweeps(tmp_path, monkeypatch):
    """Sweeps `a` (used k1, k2) and `b` (used k2, k3) under one root, and k4 written with no record, all in
    one cache folder; returns the root, the folder and each key's file."""
    root, folder = tmp_path / "root", tmp_path / "cache"
    for name in ("a", "b"):
        (root / name).mkdir(parents=True)
        (root / name / SPACE_FILE).write_text(SPACE.format(name=name))
    env = {cache.DIR_ENV: str(folder)}
    used = {"a": [1, 2], "b": [2, 3], None: [4]}
    try:
        for name, keys in used.items():
            record = {cache.RECORD_ENV: str(root / name)} if name else {}
            c = cache.configure({**env, **record})  # a worker of that sweep's run
            for k in keys:
                c.on_disk(("acts", k), lambda k=k: torch.full((256 * k,), float(k)))
            c.flush()
    finally:
        cache.configure()
    monkeypatch.setenv(cache.DIR_ENV, str(folder))
    files = {k: folder / f"{hashlib.sha256(repr(('acts', k)).encode()).hexdigest()[:32]}.pt" for k in (1, 2, 3, 4)}
    assert all(p.is_file() for p in files.values())
    return root, folder, files


def test_du_tells_this_sweeps_cache_entries_apart(two_sweeps, capsys):
    root, folder, files = two_sweeps
    size = {k: p.stat().st_size for k, p in files.items()}
    assert main(["du", str(root / "a"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    cats, in_folder = doc["categories"], doc["cache"]
    assert cats["node cache: this sweep's"] == {"files": 2, "bytes": size[1] + size[2]}
    assert cats["node cache records"]["files"] == 1  # a's one worker process
    assert not {"node cache: other sweeps'", "node cache: unrecorded"} & set(cats)  # not in a's total
    assert in_folder["node cache: other sweeps'"] == {"files": 1, "bytes": size[3]}
    assert in_folder["node cache: unrecorded"] == {"files": 1, "bytes": size[4]}
    assert in_folder["folder"] == str(folder)
    assert main(["du", str(root / "b")]) == 0
    out = capsys.readouterr().out
    assert f"this sweep's cache entries: 2 files, {human(size[2] + size[3])};" in out
    assert f"other entries in the cache folder {folder}: 2 files, {human(size[1] + size[4])}" in out


def test_prune_cache_removes_only_what_no_other_sweep_lists(two_sweeps, capsys):
    root, folder, files = two_sweeps
    assert main(["prune", str(root / "a"), "--cache", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert str(files[1]) in out and not any(str(files[k]) in out for k in (2, 3, 4))
    assert "1 files" in out.split("kept in the cache folder")[1].split("of this sweep that another")[0]
    assert all(p.exists() for p in files.values())
    assert main(["prune", str(root / "a"), "--cache"]) == 0
    assert [k for k, p in files.items() if not p.exists()] == [1]  # k2: b reads it; k3: b's; k4: nobody's record
    assert main(["prune", str(root / "b"), "--cache"]) == 0
    assert [k for k, p in files.items() if not p.exists()] == [1, 3]  # a's record still lists k2


def test_prune_keeps_the_cache_whole_when_a_record_cannot_be_read(two_sweeps, capsys):
    root, _, files = two_sweeps
    (root / "b" / cache.RECORD_DIR / "torn.json").write_text('{"files": [')
    assert main(["prune", str(root / "a"), "--cache"]) == 0
    assert "node cache kept whole" in capsys.readouterr().out
    assert all(p.exists() for p in files.values())
