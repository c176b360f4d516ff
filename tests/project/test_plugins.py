"""A plugin architecture in a file next to the space, through `stitchsweep run` under Ray: trained, stitched,
reported; the workers import the copy Ray ships (`runtime_env` `py_modules`), not the file; editing it reruns
exactly the units that use it (`plan --storage` counts them first)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.ray, pytest.mark.slow]

CLI = [sys.executable, "-m", "sweep"]
LOG_ENV = "STITCHSWEEP_TEST_PLUGIN_LOG"

# Each process that imports it appends where it was imported from, and the node it runs on where a test's
# `ray start` tagged it (tests/test_multinode.py).
PLUGIN = f'''
import os

from sweep.models.base import build, register_architecture

if os.environ.get("{LOG_ENV}"):  # a node started before the test set it (the shared cluster's head) logs nothing
    with open(os.environ["{LOG_ENV}"], "a") as log:
        log.write(__file__ + "\\t" + os.environ.get("STITCHSWEEP_TEST_NODE", "") + "\\n")


@register_architecture("my_tiny", "resnet_tiny, registered by a plugin")
def my_tiny(*, in_channels, num_classes, mean, std, image_size):
    return build("resnet_tiny", in_channels, num_classes, mean, std, image_size=image_size)
'''

SPACE = {
    "name": "plug",
    "plugins": ["my_models.py"],
    "data": {"dataset": "digits", "train_size": None, "val_size": 200, "test_size": None},
    "donors": {
        "mine": {"arch": "my_tiny", "training": "plain", "epochs": 2, "lr": 0.1, "seed": 0},
        "shipped": {"arch": "resnet_tiny", "training": "plain", "epochs": 2, "lr": 0.1, "seed": 0},
    },
    "stitching": {
        "pairs": [{"front": "zoo:mine", "end": "zoo:shipped"}, {"front": "zoo:shipped", "end": "zoo:shipped"}],
        "stitch_points": ["layer1.0"],
        "objectives": ["dm"],
        "dm_samples": 100,
    },
    "evaluation": {"eps": 0.3, "iterations": 2, "n_eval_robust": 0},
}


def plugin_space(folder: Path) -> Path:
    """The plugin file and its space in `folder` (nowhere on any worker's path)."""
    folder.mkdir()
    (folder / "my_models.py").write_text(PLUGIN)
    (folder / "space.yaml").write_text(yaml.safe_dump(SPACE, sort_keys=False))
    return folder / "space.yaml"


def cli(*args: str, cwd: Path, log: Path) -> str:
    env = {**os.environ, LOG_ENV: str(log), "PYTHONPATH": str(Path(__file__).parents[3])}
    out = subprocess.run([*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def ran(stdout: str, noun: str) -> int:
    (n,) = re.findall(rf"\] (\d+) {noun} units ran", stdout)
    return int(n)


def test_a_plugin_architecture_runs_reports_and_reruns_exactly_its_units_when_edited(tmp_path):
    space, log, work = plugin_space(tmp_path / "src"), tmp_path / "imports.log", tmp_path / "work"
    work.mkdir()
    out = cli("run", str(space), "--storage", str(tmp_path / "results"), "--num-cpus", "2", cwd=work, log=log)
    results = tmp_path / "results" / "plug"
    assert (ran(out, "donor"), ran(out, "trial")) == (2, 2)
    assert (results / "plugins" / "my_models.py").read_text() == PLUGIN  # the sweep's own copy
    assert yaml.safe_load((results / "space.yaml").read_text())["plugins"] == ["plugins/my_models.py"]
    imported = [line.split("\t")[0] for line in log.read_text().splitlines()]
    shipped = [p for p in imported if "runtime_resources" in p]  # Ray's copies of py_modules on a node
    assert shipped and not set(shipped) & {str(space.parent / "my_models.py")}, imported

    # a moved original changes nothing recorded: report and status read the copy
    (space.parent / "my_models.py").rename(tmp_path / "elsewhere.py")
    cli("report", str(results), "--out", str(tmp_path / "report"), cwd=work, log=log)
    assert (tmp_path / "report" / "index.html").is_file()
    assert "2 done" in cli("status", str(results), cwd=work, log=log)

    # an edit of the plugin's code: its donor and the trial built on it rerun, nothing else
    (space.parent / "my_models.py").write_text(PLUGIN + "\n# changed\n")
    plan = cli("plan", str(space), "--storage", str(tmp_path / "results"), cwd=work, log=log)
    assert "donors rerun because a plugin's code changed: 1" in plan, plan
    assert "trials rerun because a plugin's code changed: 1" in plan, plan
    out = cli("run", str(space), "--storage", str(tmp_path / "results"), "--num-cpus", "2", cwd=work, log=log)
    assert (ran(out, "donor"), ran(out, "trial")) == (1, 1), out
    assert len(list((results / "donors").glob("mine-*.parquet"))) == 2
    assert len(list((results / "trials").glob("*.parquet"))) == 3
