"""A plugin architecture in a file next to the space, through `stitchsweep run` under Ray: trained, stitched,
reported; the workers import the copy Ray ships (`runtime_env` `py_modules`), not the file; editing it reruns
exactly the units that use it (`plan --storage` counts them first). A plugin that is a package folder, in-process:
imported as its folder's name, versioned over all its files, kept whole in `RESULTS/plugins/`, localised from
remote storage, shipped to Ray as a directory and checked on a worker (under Ray, through the CLI:
`tests/project/test_extending.py`, the plugins page's kind and index)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sweep.config.errors import SpecError
from sweep.registry import OBJECTIVES, ORIGINS
from tests.conftest import TINY_SPACE

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


@pytest.mark.ray
@pytest.mark.slow
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


@pytest.mark.ray
@pytest.mark.slow
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


@pytest.mark.ray
@pytest.mark.slow
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


# A package plugin: its objective registered by one module, which imports a helper from another.
PACKAGE = {
    "__init__.py": '"""A package plugin."""\n\nfrom {module}.objectives import fit  # noqa: F401  (registers it)\n',
    "objectives.py": """from sweep.stitching.declared import register_objective
from {module}.helpers import describe


@register_objective("{name}", {{"dm_samples"}}, describe())
def fit(ctx):
    raise ValueError("not fitted here")
""",
    "helpers.py": 'def describe():\n    return "a package plugin\'s objective"\n',
    "weights.txt": "data the plugin reads\n",
}


@pytest.fixture
def package(tmp_path, forget_plugins):
    """A package plugin folder `tmp_path/<module>/` of a fresh name registering the objective `name`, and a space
    beside it listing it (`<module>/`) whose trials use it: (folder, module, name)."""
    import uuid

    module, name = f"pkg_{uuid.uuid4().hex[:8]}", f"obj_{uuid.uuid4().hex[:8]}"
    folder = tmp_path / module
    folder.mkdir()
    for rel, text in PACKAGE.items():
        (folder / rel).write_text(text.format(module=module, name=name))
    space = dict(TINY_SPACE, plugins=[f"{module}/"], evaluation=dict(TINY_SPACE["evaluation"], n_eval_robust=0))
    space["stitching"] = dict(TINY_SPACE["stitching"], objectives=["dm", name], stitch_points=["layer1.0"])
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(space, sort_keys=False))
    forget_plugins(module)
    return folder, module, name


def test_a_plugin_entry_is_a_file_a_package_folder_or_a_module_name(tmp_path):
    from sweep.config.plugins import plugin_form

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "plain").mkdir()  # no __init__.py: not a package
    forms = {s: plugin_form(s, tmp_path) for s in ("m.py", "pkg/", "pkg", "sub/pkg", "/abs/pkg", "plain", "mylab.x")}
    assert forms == {"m.py": "file", "pkg/": "folder", "pkg": "folder", "sub/pkg": "folder", "/abs/pkg": "folder",
                     "plain": "module", "mylab.x": "module"}  # fmt: skip


def test_a_package_plugin_is_imported_as_its_folder_s_name_and_versioned_over_all_its_files(package, tmp_path):
    from sweep.config.plugins import folder_version, load_plugins, package_sources, package_version
    from sweep.config.space import load_space
    from sweep.registry import entry_version

    folder, module, name = package
    sweep = load_space(tmp_path / "space.yaml")
    (plugin,) = sweep.plugins
    assert (plugin.module, plugin.form, plugin.path) == (module, "folder", folder.resolve())
    assert plugin.version == package_version(package_sources(folder)) == folder_version(folder)
    assert sorted(package_sources(folder)) == ["__init__.py", "helpers.py", "objectives.py"]  # its .py files
    assert ORIGINS[("objective", name)] == f"{module}.objectives"  # registered by one of its modules ...
    assert entry_version("objective", name) == plugin.version  # ... versioned as the package
    assert {t.objective for t in sweep.trials} == {"dm", name}
    assert load_plugins([module], tmp_path)[0] == dataclass_replace(plugin, spec=module)  # a bare name: the folder

    versions = {plugin.version}
    (folder / "helpers.py").write_text(PACKAGE["helpers.py"] + "\n# edited\n")  # any .py file's edit
    versions.add(folder_version(folder))
    (folder / "sub").mkdir()
    (folder / "sub" / "more.py").write_text("X = 1\n")  # a new module
    versions.add(folder_version(folder))
    (folder / "weights.txt").write_text("other data\n")  # not a .py file: no new version
    versions.add(folder_version(folder))
    assert len(versions) == 3
    (folder / "sub" / "more.py").rename(folder / "sub" / "most.py")  # a path is part of it
    assert folder_version(folder) not in versions
    init = PACKAGE["__init__.py"].format(module=module)
    (folder / "__init__.py").write_text('PLUGIN_VERSION = "7"\n' + init)
    assert folder_version(folder) == "7"


def dataclass_replace(obj, **changes):
    import dataclasses

    return dataclasses.replace(obj, **changes)


def test_a_package_plugin_s_mistakes_are_one_line_each(tmp_path, forget_plugins):
    from sweep.config.plugins import load_plugins

    def refused(spec: str) -> str:
        with pytest.raises(SpecError) as err:
            load_plugins([spec], tmp_path)
        assert "\n" not in str(err.value)
        return str(err.value)

    assert refused("nope/").startswith("plugins[0]: expected a Python file or a package folder")
    assert "(no such folder: " in refused("nope/")
    (tmp_path / "bare").mkdir()
    assert refused("bare/").startswith("plugins[0]: expected a package folder (one holding an __init__.py)")
    (tmp_path / "my-pkg").mkdir()
    (tmp_path / "my-pkg" / "__init__.py").write_text("")
    assert refused("my-pkg/").startswith("plugins[0]: expected a folder named like a Python package")
    (tmp_path / "json").mkdir()
    (tmp_path / "json" / "__init__.py").write_text("")
    assert "expected a plugin folder whose name no other module has" in refused("json/")
    assert "ModuleNotFoundError: No module named 'nope_" in refused(f"nope_{id(tmp_path)}")  # neither: a module

    for name, source, shown in [
        ("pkg_syntax", "x = 1\ndef (:\n", "SyntaxError: invalid syntax (pkg_syntax/broken.py line 2)"),
        ("pkg_raises", "import math\n\nraise RuntimeError('no GPU here')\n", "RuntimeError: no GPU here (at "
         "pkg_raises/broken.py:3)"),
    ]:  # fmt: skip
        forget_plugins(name)
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"from {name} import broken  # noqa: F401\n")
        (tmp_path / name / "broken.py").write_text(source)
        line = refused(f"{name}/")
        assert line.startswith(f"plugins[0]: expected a plugin that imports, found '{name}/' (") and shown in line
        assert name not in sys.modules and f"{name}.broken" not in sys.modules


def test_a_failure_in_a_package_plugin_names_its_file_inside_the_package(package, tmp_path):
    from sweep.config.failures import describe_failure
    from sweep.config.plugins import load_plugins

    folder, module, name = package
    load_plugins([f"{module}/"], tmp_path)
    with pytest.raises(ValueError) as err:
        OBJECTIVES[name].fit(None)
    assert describe_failure(err.value) == f"ValueError: not fitted here (at {module}/objectives.py:7 in fit)"


def test_a_package_plugin_is_kept_whole_and_the_kept_space_imports_the_copy(package, tmp_path):
    from sweep.config.plugins import keep_plugins, ray_modules, recorded_versions
    from sweep.config.space import load_space
    from sweep.store.results import SweepDir

    folder, module, name = package
    sweep = load_space(tmp_path / "space.yaml")
    (folder / "__pycache__").mkdir(exist_ok=True)  # what importing it may leave: not kept
    (folder / "__pycache__" / "helpers.cpython-311.pyc").write_bytes(b"")
    sweep_dir = SweepDir(tmp_path / "results", sweep.name)
    sweep_dir.create()
    copy = tmp_path / "results" / sweep.name / "plugins" / module
    copy.mkdir(parents=True)
    (copy / "gone.py").write_text("")  # a file of an earlier copy the original no longer has
    kept = keep_plugins(sweep, sweep_dir)
    assert kept["plugins"] == [f"plugins/{module}/"]
    assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*")) == sorted(PACKAGE)  # whole, no more
    versions = recorded_versions(sweep_dir)
    assert versions[module] == versions[f"{module}.objectives"] == sweep.plugins[0].version

    (sweep_dir.path / "space.yaml").write_text(yaml.safe_dump(kept, sort_keys=False))
    folder.rename(tmp_path / "moved")  # the original gone: the kept space imports the copy
    again = load_space(tmp_path / "results" / sweep.name / "space.yaml")
    (plugin,) = again.plugins
    assert plugin.path == copy and plugin.version == sweep.plugins[0].version and plugin.form == "folder"
    assert {t.trial_id for t in again.trials} == {t.trial_id for t in sweep.trials}
    assert ray_modules(again.plugins) == [str(copy)]  # Ray ships the copy as a directory


def test_a_package_plugin_is_checked_on_a_worker_against_the_driver_s_version(package, tmp_path):
    """A worker imports the folder Ray placed on its path (by its name) and refuses another version."""
    import os
    import subprocess

    from sweep.config.plugins import load_plugins, ray_modules, worker_plugins

    folder, module, name = package
    plugins = load_plugins([f"{module}/"], tmp_path)
    assert ray_modules(plugins) == [str(folder.resolve())]
    ((_, version, form),) = worker_plugins(plugins)
    assert form == "folder"
    check = (
        "import sys\n"
        f"sys.path.insert(0, {str(folder.parent)!r})  # what Ray's py_modules does for a directory\n"
        "from sweep.config.plugins import import_on_worker\n"
        "from sweep.registry import OBJECTIVES, PLUGIN_VERSIONS, entry_version\n"
        f"import_on_worker([({module!r}, {version!r}, 'folder')])\n"
        f"assert entry_version('objective', {name!r}) == {version!r}, PLUGIN_VERSIONS\n"
        "try:\n"
        f"    import_on_worker([({module!r}, 'other', 'folder')])\n"
        "except RuntimeError as exc:\n"
        "    print(exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    out = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"plugin {module}: the worker has version {version}, the driver planned other"


def test_a_package_plugin_on_remote_storage_is_localised_with_all_its_files(tmp_path):
    from sweep.config.plugins import localise
    from sweep.store.storage import open_root

    remote = tmp_path / "remote"
    files = ("pkg/__init__.py", "pkg/sub/x.py", "pkg/data.txt", "bare/__init__.py", "one.py", "pkg/__pycache__/a.pyc")
    for rel in files:
        (remote / rel).parent.mkdir(parents=True, exist_ok=True)
        (remote / rel).write_text(rel)
    local = localise(open_root(str(remote)), ["pkg/", "bare", "one.py", "mylab.indices"])
    got = sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())
    assert got == ["bare/__init__.py", "one.py", "pkg/__init__.py", "pkg/data.txt", "pkg/sub/x.py"]
    assert (local / "pkg" / "sub" / "x.py").read_text() == "pkg/sub/x.py"


def test_the_plugin_flag_takes_a_package_folder_of_the_working_directory(package, tmp_path, monkeypatch, capsys):
    from sweep.cli import main

    folder, module, name = package
    work = tmp_path / "work"
    work.mkdir()
    folder.rename(work / module)
    (tmp_path / "space").mkdir()
    space = yaml.safe_load((tmp_path / "space.yaml").read_text())
    del space["plugins"]  # the space names the objective, the command line its plugin
    (tmp_path / "space" / "space.yaml").write_text(yaml.safe_dump(space))
    monkeypatch.chdir(work)
    assert main(["plan", str(tmp_path / "space" / "space.yaml"), "--plugin", f"{module}/"]) == 0, capsys.readouterr()
    assert f"zoo:plain_a -> zoo:plain_a {name}: 1 trial" in capsys.readouterr().out
