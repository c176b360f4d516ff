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
    assert "no longer in the space: " in out and "1 donors, 1 trials part(s), set aside in _stale/" in out, out
    # the results are the edited code's: the earlier version's units are kept apart, read on request
    assert len(list((results / "donors").glob("mine-*.parquet"))) == 1
    assert len(list((results / "trials").glob("*.parquet"))) == 2
    assert len(list((results / "_stale" / "trials").glob("*.parquet.kept"))) == 1
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    check = (
        "import analysis, sys; t = analysis.load(sys.argv[1]); s = analysis.load(sys.argv[1], stale=True);"
        "print(t['trials']['trial_id'].nunique(), len(t['trials']), len(t['donors']), int(s['trials']['stale'].sum()))"
    )
    read = subprocess.run([sys.executable, "-c", check, str(results)], env=env, capture_output=True, text=True)
    assert read.stdout.split() == ["2", "2", "2", "1"], read.stdout + read.stderr  # one donors row per donor


ATTEMPTS_ENV = "STITCHSWEEP_TEST_ATTEMPTS"

# A plugin index that returns an array where its trials column holds a number, and a plugin kind whose run
# raises: each appends a line to the attempts file every time it runs. Its PLUGIN_VERSION stays "1" across the
# fix (a fix that changes no result keeps the units' ids, so `--failed` reruns the same units).
FAILING = f'''
import os

import numpy as np
import pyarrow as pa

from sweep.kinds.base import Kind, register_kind
from sweep.measures.indices import register_index
from sweep.store.catalogue import IndexEntry

PLUGIN_VERSION = "1"
FIXED = False


def attempt(what):
    with open(os.environ["{ATTEMPTS_ENV}"], "a") as log:
        log.write(what + "\\n")


def r2(a, b):
    attempt("r2")
    return 0.5 if FIXED else np.ones(3)


register_index(IndexEntry("r2_units", ("sim_r2_units",), "r2 per unit"), r2, "flatten")

SCHEMA = pa.schema([("unit_id", pa.string()), ("status", pa.string()), ("error", pa.string())])


def parts(sweep_dir, unit):
    return [sweep_dir.path / "probe" / (unit + ".parquet")]


def run(unit, ctx):
    attempt("probe")
    if not FIXED:
        raise ValueError("the probe is not ready")
    from sweep.store.results import write_rows

    write_rows(parts(ctx.sweep_dir, unit)[0], [dict(unit_id=unit, status="done")], SCHEMA)
    return dict(status="done")


def label(unit):
    return "probe " + unit


def units(raw, ctx):
    return ("p0",)


def unit_id(unit):
    return unit


register_kind(
    Kind("probe", "probe", "probe units", "probe", parts, run, label, section="probe", parse=units, unit_id=unit_id,
         schema=SCHEMA, after=("donor",))
)
'''


def test_failing_plugin_code_is_recorded_failed_once_with_its_reason_and_rerun_with_failed(tmp_path):
    """Under Ray, through the CLI: each failing unit runs once (no retry as a lost worker), is recorded failed
    with its reason, named by `status` (exit 1); fixed, `run --failed` reruns exactly those."""
    src, work, attempts = tmp_path / "src", tmp_path / "work", tmp_path / "attempts.log"
    src.mkdir()
    work.mkdir()
    (src / "checks.py").write_text(FAILING)
    space = {
        **SPACE,
        "name": "failing",
        "plugins": ["checks.py"],
        "donors": {"shipped": SPACE["donors"]["shipped"]},
        "stitching": {**SPACE["stitching"], "pairs": [{"front": "zoo:shipped", "end": "zoo:shipped"}]},
        "probe": {},
    }
    space["stitching"]["indices"] = ["r2_units"]
    (src / "space.yaml").write_text(yaml.safe_dump(space, sort_keys=False))
    env = {**os.environ, ATTEMPTS_ENV: str(attempts), "PYTHONPATH": str(Path(__file__).parents[2])}
    results = tmp_path / "results"

    def call(*args):
        return subprocess.run([*CLI, *args], cwd=work, env=env, capture_output=True, text=True, timeout=900)

    out = call("run", str(src / "space.yaml"), "--storage", str(results), "--num-cpus", "2")
    assert out.returncode == 1, out.stdout + out.stderr  # recorded, with failures: not complete
    assert sorted(attempts.read_text().split()) == ["probe", "r2"], out.stdout  # each ran once: no retry
    assert "lost with its worker" not in out.stdout and "ray error" not in out.stdout, out.stdout
    status = call("status", str(results / "failing"))
    assert status.returncode == 1, status.stdout + status.stderr
    assert "column 'sim_r2_units': expected double, found ndarray" in status.stdout, status.stdout
    assert "ValueError: the probe is not ready (at checks.py:" in status.stdout, status.stdout

    (src / "checks.py").write_text(FAILING.replace("FIXED = False", "FIXED = True"))
    out = call("run", str(src / "space.yaml"), "--storage", str(results), "--num-cpus", "2", "--failed")
    assert out.returncode == 0, out.stdout + out.stderr
    assert sorted(attempts.read_text().split()) == ["probe", "probe", "r2", "r2"], out.stdout
    assert call("status", str(results / "failing")).returncode == 0


# A plugin kind whose run writes its part through the store, on a disk that is full until the test frees it
# (a flag file): the run stops in one line (exit 3), nothing is recorded failed, and `resume` runs each once.
FULL = f'''
import os
from pathlib import Path

import pyarrow as pa

from sweep.kinds.base import Kind, register_kind
from sweep.store.storage import DiskFull

SCHEMA = pa.schema([("unit_id", pa.string()), ("status", pa.string()), ("error", pa.string())])


def parts(sweep_dir, unit):
    return [sweep_dir.path / "filler" / (unit + ".parquet")]


def run(unit, ctx):
    with open(os.environ["{ATTEMPTS_ENV}"], "a") as log:
        log.write(unit + "\\n")
    part = parts(ctx.sweep_dir, unit)[0]
    if unit == "f1" and not Path(os.environ["{ATTEMPTS_ENV}"] + ".freed").exists():
        raise DiskFull(str(part.parent), 4096)
    from sweep.store.results import write_rows

    write_rows(part, [dict(unit_id=unit, status="done")], SCHEMA)
    return dict(status="done")


def label(unit):
    return "filler " + unit


register_kind(
    Kind("filler", "filler", "filler units", "filler", parts, run, label, section="filler",
         parse=lambda raw, ctx: ("f0", "f1", "f2"), unit_id=lambda u: u, schema=SCHEMA, after=("donor",))
)
'''


def test_a_worker_s_full_disk_stops_the_run_in_one_line_and_resume_runs_each_unit_once(tmp_path):
    src, attempts, results = tmp_path / "src", tmp_path / "attempts.log", tmp_path / "results"
    src.mkdir()
    (src / "full.py").write_text(FULL)
    space = {**SPACE, "name": "full", "plugins": ["full.py"], "filler": {}}
    space["donors"] = {"shipped": {**SPACE["donors"]["shipped"], "epochs": 1}}
    del space["stitching"]
    (src / "space.yaml").write_text(yaml.safe_dump(space, sort_keys=False))
    env = {**os.environ, ATTEMPTS_ENV: str(attempts), "PYTHONPATH": str(Path(__file__).parents[2])}

    def call(*args):
        return subprocess.run([*CLI, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)

    out = call("run", str(src / "space.yaml"), "--storage", str(results), "--num-cpus", "1")
    assert out.returncode == 3, out.stdout + out.stderr
    assert "Trial task failed" not in out.stderr, out.stderr  # no traceback of Tune's before it
    line = out.stderr.strip().splitlines()[-1]  # the command's last word: one line
    assert line.startswith("stitchsweep: error: disk full: ") and "filler" in line and "4,096 bytes" in line, line
    assert "stitchsweep resume" in line, line
    assert attempts.read_text().split().count("f1") == 1, out.stdout  # not retried as a lost worker
    assert not [p for p in (results / "full" / "filler").glob("*.parquet") if "failed" in p.read_bytes().decode(
        "latin-1")]  # fmt: skip

    Path(str(attempts) + ".freed").write_text("")  # space freed
    again = call("resume", str(results / "full"), "--num-cpus", "1")
    assert again.returncode == 0, again.stdout + again.stderr
    ran = attempts.read_text().split()
    assert ran.count("f1") == 2 and all(ran.count(u) <= 2 for u in ("f0", "f2")), ran
    done = sorted(p.name for p in (results / "full" / "filler").glob("*.parquet"))
    assert done == ["f0.parquet", "f1.parquet", "f2.parquet"]
