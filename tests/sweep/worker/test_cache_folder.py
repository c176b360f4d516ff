"""The node cache's folder is the user's own (`sweep.worker.cache.check_folder`): a default folder per user made
owner-only, another user's folder or one group or others can write refused in one line naming it and
STITCHSWEEP_CACHE_DIR (unless STITCHSWEEP_CACHE_SHARED=1); each file holds its full key, so a planted, stale or
torn file is computed again; each process records the files it used in the sweep's folder."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile

import pytest
import torch

from sweep.config.errors import SpecError
from sweep.store.results import SweepDir
from sweep.worker import cache


@pytest.fixture
def restore():
    """This process's cache put back to the environment's settings after the test."""
    yield
    cache.configure()


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_default_folder_is_the_users_own_and_owner_only(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # what $TMPDIR sets
    old = os.umask(0)  # the mode is set, not left to the umask
    try:
        settings = cache.Settings.from_env({})
    finally:
        os.umask(old)
    assert settings.disk_dir == tmp_path / f"stitchsweep-cache-{os.getuid()}"
    assert settings.disk_dir.is_dir() and _mode(settings.disk_dir) == 0o700


def _refused(folder, env: dict | None = None) -> str:
    with pytest.raises(SpecError) as err:
        cache.Settings.from_env({cache.DIR_ENV: str(folder), **(env or {})})
    line = str(err.value)
    assert "\n" not in line and str(folder) in line and line.startswith(f"{cache.DIR_ENV}: expected")
    assert cache.SHARED_ENV in line
    return line


def test_another_users_folder_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    me = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: me + 1)  # the folder is now another user's
    assert f"owned by uid {me}" in _refused(folder)


@pytest.mark.parametrize("mode", [0o770, 0o757, 0o777])
def test_a_folder_group_or_others_can_write_is_refused(tmp_path, mode):
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(mode)
    assert f"mode {mode:04o}" in _refused(folder)


def test_a_link_planted_at_the_folders_name_is_refused(tmp_path, monkeypatch):
    """The default folder's name in a shared temporary folder: another user may put a link there first."""
    target = tmp_path / "mine"
    target.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(target)
    real_lstat, me = os.lstat, os.getuid()

    def lstat(path, *a, **k):
        st = real_lstat(path, *a, **k)
        return os.stat_result((*st[:4], me + 1, *st[5:])) if str(path) == str(link) else st

    monkeypatch.setattr(os, "lstat", lstat)
    assert f"owned by uid {me + 1}" in _refused(link)


def test_the_shared_opt_in_accepts_such_folders(tmp_path, monkeypatch):
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    me = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: me + 1)
    settings = cache.Settings.from_env({cache.DIR_ENV: str(folder), cache.SHARED_ENV: "1"})
    assert settings.disk_dir == folder
    with pytest.raises(SpecError, match=cache.SHARED_ENV):
        cache.Settings.from_env({cache.DIR_ENV: str(folder), cache.SHARED_ENV: "yes"})


def test_run_and_du_stop_in_one_line_on_a_refused_folder(tmp_path, monkeypatch, capsys, write_space, tiny_space):
    from sweep.cli import EXIT_BAD_INPUT, main

    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    monkeypatch.setenv(cache.DIR_ENV, str(folder))
    assert main(["run", str(write_space(tiny_space)), "--storage", str(tmp_path / "r")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"error: {cache.DIR_ENV}: expected" in err[0] and str(folder) in err[0]
    assert not (tmp_path / "r" / "tiny").exists()  # refused before anything was written
    (tmp_path / "r" / "tiny").mkdir(parents=True)  # a results folder of that sweep
    (tmp_path / "r" / "tiny" / "space.yaml").write_text(write_space(tiny_space).read_text())
    for command in (["du"], ["prune", "--cache"]):
        assert main([*command, str(tmp_path / "r" / "tiny")]) == EXIT_BAD_INPUT
        assert str(folder) in capsys.readouterr().err


def test_a_worker_leaves_a_refused_folder_alone(tmp_path, capsys, restore):
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    c = cache.configure({cache.DIR_ENV: str(folder)})
    assert c.settings.disk_dir is None and c.settings.enabled
    assert str(folder) in capsys.readouterr().err
    c.on_disk(("acts", 1), lambda: torch.ones(3))
    c.flush()
    assert not list(folder.iterdir())


def _file(folder, key: tuple):
    """The node's file of `key`: its name is a hash of the key, which a planted file can take."""
    return folder / f"{hashlib.sha256(repr(key).encode()).hexdigest()[:32]}.pt"


def _plant(path, key: str, value) -> None:
    path.parent.mkdir(mode=0o700, exist_ok=True)
    torch.save({"key": key, "value": value}, path)


def test_a_planted_or_stale_file_is_computed_again(tmp_path, restore):
    key, value, path = ("acts", "front", 0), torch.arange(6.0), _file(tmp_path / "node", ("acts", "front", 0))
    _plant(path, repr(("acts", "other", 0)), torch.zeros(6))  # valid format, another key inside
    c = cache.configure({cache.DIR_ENV: str(tmp_path / "node")})
    assert torch.equal(c.on_disk(key, lambda: value), value) and c.stats.misses == 1
    c.flush()
    assert torch.load(path, weights_only=True)["key"] == repr(key)  # rewritten with its own key
    torch.save(torch.zeros(6), path)  # a file without a key (another format)
    again = cache.WorkerCache(c.settings)
    assert torch.equal(again.on_disk(key, lambda: value * 2), value * 2) and again.stats.misses == 1
    again.flush()
    third = cache.WorkerCache(c.settings)  # the node's file, now right: read, not computed
    assert torch.equal(third.on_disk(key, lambda: pytest.fail("recomputed")), value * 2)


def test_a_torn_file_is_computed_again(tmp_path, restore):
    c = cache.configure({cache.DIR_ENV: str(tmp_path / "node")})
    key, value = ("acts", "front", 1), torch.randn(64, 8)
    c.on_disk(key, lambda: value)
    c.flush()
    path = _file(tmp_path / "node", key)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # a writer that died half way
    other = cache.WorkerCache(c.settings)
    assert torch.equal(other.on_disk(key, lambda: value + 1), value + 1) and other.stats.misses == 1


def test_each_process_records_the_files_it_used_in_the_sweeps_folder(tmp_path, monkeypatch, restore):
    sweep_dir = SweepDir(tmp_path / "root", "a")
    monkeypatch.setenv(cache.RECORD_ENV, "")  # restored (unset) after the test
    cache.record_in(sweep_dir)  # the driver's call: the variable goes to the workers with the others
    env = {cache.DIR_ENV: str(tmp_path / "node"), cache.RECORD_ENV: os.environ[cache.RECORD_ENV]}
    first = cache.configure(env)
    first.on_disk(("k", 1), lambda: torch.ones(2))
    first.flush()
    second = cache.WorkerCache(cache.Settings.from_env(env))  # another worker: reads k1, computes k2
    second.on_disk(("k", 1), lambda: pytest.fail("recomputed"))
    second.store(("k", 2), torch.zeros(2))
    second.flush()
    records = sorted((tmp_path / "root" / "a" / cache.RECORD_DIR).glob("*.json"))
    names = [set(json.loads(r.read_text())["files"]) for r in records]
    k1, k2 = (_file(tmp_path, ("k", i)).name for i in (1, 2))
    assert len(records) == 2 and sorted(names, key=len) == [{k1}, {k1, k2}]
