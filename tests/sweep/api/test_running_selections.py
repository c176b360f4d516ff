"""`run --only` runs what it selects (the rest stays pending), `run --rerun` sets its units' parts aside and
runs them again under the same ids, and `resume` after a run with overrides runs the overridden space: real
runs of the tiny space under Ray."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sweep.config.space import load_space
from sweep.planning.selection import select

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _cli(*args) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "sweep", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=dict(os.environ))


def _parts(results: Path) -> dict[str, int]:
    return {p.stem: p.stat().st_mtime_ns for p in (results / "trials").glob("*.parquet")}


def test_only_runs_its_selection_and_rerun_sets_parts_aside_and_runs_them_again(tiny_space, write_space, tmp_path):
    space, storage = write_space(tiny_space), tmp_path / "results"
    results = storage / "tiny"
    sweep = load_space(space)
    dm = select(sweep, ["objective=dm"])["trial"]
    first = _cli("run", space, "--storage", storage, "--num-cpus", 2, "--only", "objective=dm")
    assert first.returncode == 1, first.stdout + first.stderr  # the rest stays pending
    assert set(_parts(results)) == dm and "2 done, 0 failed, 2 pending" in first.stdout
    again = select(sweep, ["objective=dm,stitch_point=layer3.*"])["trial"]
    before = _parts(results)
    second = _cli("run", space, "--storage", storage, "--num-cpus", 2, "--rerun", "objective=dm,stitch_point=layer3.*")
    assert second.returncode == 1, second.stdout + second.stderr
    assert "--rerun: set aside 1 part(s) of 1 unit(s)" in second.stdout
    aside = list((results / "_set_aside").glob("*/trials/*.parquet.kept"))
    assert {p.name.removesuffix(".parquet.kept") for p in aside} == again  # kept
    after = _parts(results)
    assert set(after) == dm  # the rerun wrote its part again under the same id, the other dm part untouched
    assert all(after[u] != before[u] for u in again) and all(after[u] == before[u] for u in dm - again)
    import analysis

    trials = analysis.load(results)["trials"]  # readers do not see what was set aside
    assert sorted(trials["trial_id"]) == sorted(dm)


def test_resume_after_a_run_with_overrides_runs_the_overridden_space(tiny_space, write_space, tmp_path):
    tiny_space["stitching"]["objectives"] = ["dm"]
    space, storage = write_space(tiny_space), tmp_path / "results"
    overrides = ["name=short", "stitching.stitch_points=[layer1.0]", "+stitching.indices=[cka]"]
    first = _cli("run", space, *overrides, "--storage", storage, "--num-cpus", 2, "--only", "kind=donor")
    assert first.returncode == 1, first.stdout + first.stderr
    saved = yaml.safe_load((storage / "short" / "space.yaml").read_text())
    assert saved["name"] == "short" and saved["stitching"]["stitch_points"] == ["layer1.0"]
    resumed = _cli("resume", storage / "short", "--num-cpus", 2)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    overridden = load_space(space, overrides).trials
    assert set(_parts(storage / "short")) == {t.trial_id for t in overridden} and len(overridden) == 1
    assert not (storage / "tiny").exists()
