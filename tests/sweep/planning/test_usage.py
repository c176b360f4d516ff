"""`stitchsweep du` and `prune` on a results folder written with the store's own writer (no run): `du`'s numbers
are the files' sizes, `prune --dry-run` lists and `prune` removes only files no unit reads, and `analysis.load`
reads the same rows before and after."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from sweep.cli import main
from sweep.store.layout import SPACE_FILE
from sweep.worker.cache import RECORD_DIR

SPACE = """
name: tiny
data: {dataset: digits, train_size: 64, val_size: 16, test_size: 32}
donors:
  a: {arch: resnet_tiny, training: plain, epochs: 3, lr: 0.1, seed: 0, checkpoint_every: 1}
training_similarity:
  - {name: plain, donors: [zoo:a], points: stitch, images: 16, batch_size: 16}
"""


def _write(path: Path, n: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * n)
    return path


@pytest.fixture
def results(tmp_path, monkeypatch):
    """A sweep folder with synthetic parts, a zoo with a read and an unread donor, leftovers, and a node cache
    holding a file this sweep's record lists and one no record lists."""
    from sweep.config.space import load_space
    from tests.synthetic import synthetic_results

    space = tmp_path / "tiny.yaml"
    space.write_text(SPACE)
    sweep_root = tmp_path / "root" / "tiny"
    synthetic_results(space, sweep_root)
    (sweep_root / SPACE_FILE).write_text(SPACE)
    key = load_space(space).donors["a"].donor_key
    zoo = tmp_path / "root" / "zoo"
    stale = zoo / "0123456789abcdef"  # a donor no space under the root names
    files = {
        "read_ckpt": _write(zoo / key / "model.pt", 1000),
        "read_epoch": _write(zoo / key / "epochs" / "epoch-0003.pt", 300),
        "unread_epoch": _write(zoo / key / "epochs" / "epoch-0009.pt", 200),  # not one of the unit's epochs
        "stale_ckpt": _write(stale / "model.pt", 700),
        "stale_state": _write(stale / "train_state.pt", 50),
        "tmp": _write(sweep_root / "trials" / ".tmp-x.parquet.1234", 10),
        "aside": _write(sweep_root / "trials" / "old.parquet.corrupt", 20),
        "cache": _write(tmp_path / "cache" / "act.npy", 40),
        "unrecorded_cache": _write(tmp_path / "cache" / "other.npy", 30),
    }
    (tmp_path / "cache").chmod(0o700)  # the user's own folder, whatever the umask
    _write(sweep_root / RECORD_DIR / "host-1-ab.json", 0).write_text(json.dumps({"files": ["act.npy"]}))
    monkeypatch.setenv("STITCHSWEEP_CACHE_DIR", str(tmp_path / "cache"))
    return sweep_root, files


def _du(results: Path | str, capsys) -> dict:
    assert main(["du", str(results), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_du_counts_every_file_at_its_size(results, capsys):
    sweep_root, files = results
    doc = _du(sweep_root, capsys)
    listed = [p for top in (sweep_root, sweep_root.parent / "zoo") for p in top.rglob("*")] + [files["cache"]]
    on_disk = [p for p in listed if p.is_file()]  # the cache folder's unrecorded file apart
    assert doc["total"] == {"files": len(on_disk), "bytes": sum(os.path.getsize(p) for p in on_disk)}
    cats = doc["categories"]
    assert cats["zoo checkpoints"] == {"files": 2, "bytes": 1700}
    assert cats["kept epochs"] == {"files": 2, "bytes": 500}
    assert cats["node cache: this sweep's"] == {"files": 1, "bytes": 40}
    assert doc["cache"] == {
        "folder": str(files["cache"].parent),
        "node cache: this sweep's": {"files": 1, "bytes": 40},
        "node cache: unrecorded": {"files": 1, "bytes": 30},
    }
    for table in ("donors", "training_similarity"):
        parts = list((sweep_root / table).glob("*.parquet"))
        assert parts and cats[f"{table} parts"] == {"files": len(parts), "bytes": sum(map(os.path.getsize, parts))}


def _rows(results: Path) -> dict[str, pd.DataFrame]:
    from analysis import load

    return {k: v.sort_index(axis=1).reset_index(drop=True) for k, v in load(results).items()}


@pytest.mark.parametrize("flags", [[], ["--zoo-unused", "--cache"]])
def test_prune_removes_only_unread_files(results, capsys, flags):
    sweep_root, files = results
    before = _rows(sweep_root)
    cache = set(files["cache"].parent.iterdir())
    everything = {p for p in sweep_root.parent.rglob("*") if p.is_file()} | cache
    assert main(["prune", str(sweep_root), "--dry-run", *flags]) == 0
    listing = capsys.readouterr().out
    assert everything == {p for p in sweep_root.parent.rglob("*") if p.is_file()} | cache
    gone = {"tmp", "aside", "unread_epoch"} | ({"stale_ckpt", "stale_state", "cache"} if flags else set())
    assert {k for k, p in files.items() if str(p) in listing} == gone
    assert main(["prune", str(sweep_root), *flags]) == 0
    assert {k for k, p in files.items() if not p.exists()} == gone
    after = _rows(sweep_root)
    assert before.keys() == after.keys() and any(len(v) for v in before.values())
    for name in before:
        pd.testing.assert_frame_equal(before[name], after[name])


def test_prune_keeps_the_zoo_when_a_space_cannot_be_read(results, capsys):
    sweep_root, files = results
    (sweep_root.parent / "other").mkdir()
    (sweep_root.parent / "other" / SPACE_FILE).write_text("name: other\nnot_a_field: 1\n")
    assert main(["prune", str(sweep_root), "--zoo-unused"]) == 0
    assert "zoo kept whole" in capsys.readouterr().out
    assert all(files[k].exists() for k in ("unread_epoch", "stale_ckpt", "read_epoch"))
    assert not files["tmp"].exists()


def test_du_and_prune_take_a_pyarrow_uri(results, capsys):
    sweep_root, files = results
    local = _du(sweep_root, capsys)
    assert _du(f"file://{sweep_root}", capsys) == {**local, "sweep": f"file://{sweep_root}"}
    assert main(["prune", f"file://{sweep_root}"]) == 0
    assert not files["unread_epoch"].exists() and files["read_epoch"].exists()
