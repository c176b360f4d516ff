"""stitchsweep installed into an environment of one's own: one version (pyproject.toml's, which the installed
metadata, `sweep.__version__`, `stitchsweep --version` and every results row carry); dependencies stated as
ranges, with the exact versions of this project's machines in constraints.txt (what `make lock` resolves to);
and a wheel that works outside the checkout: built, installed into a fresh virtual environment, and run there
from an empty folder (the shipped spaces by name, `init`, a tiny run and its report; the Python API planning,
running, interrupted by SIGINT, resuming and loading a sweep with a plugin kind and index)."""

import email
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, TINY_SPACE

PYPROJECT = (REPO / "pyproject.toml").read_text()
VERSION = re.search(r'^version = "([^"]+)"', PYPROJECT, flags=re.M).group(1)


def _constraints() -> dict[str, str]:
    lines = (REPO / "constraints.txt").read_text().splitlines()
    return dict(line.split("==") for line in lines if line and not line.startswith("#"))


def test_the_version_is_pyprojects_everywhere(capsys):
    import sweep
    from sweep.cli import main

    assert sweep.__version__ == VERSION == metadata.version("stitchsweep")
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"stitchsweep {VERSION}"


def test_a_checkout_that_is_not_installed_reads_pyproject(monkeypatch):
    import sweep

    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    assert sweep._version() == VERSION


def test_a_results_row_carries_the_version():
    from sweep import __version__
    from sweep.kinds import base

    assert "from sweep import __version__" in Path(base.__file__).read_text()  # what each row's writer reads
    assert __version__ == VERSION


def test_dependencies_are_ranges_and_the_lock_holds_the_constraints():
    """No `==` among the runtime dependencies; constraints.txt pins what the lock holds, within those ranges."""
    deps = re.search(r"^dependencies = \[(.*?)^\]", PYPROJECT, flags=re.M | re.S).group(1)
    stated = [line.split('"')[1] for line in deps.splitlines() if line.strip().startswith('"')]
    assert stated and not [d for d in stated if "==" in d]
    assert {"torch", "torchvision", "timm"} <= {re.split(r"[\[<>=!~ ]", d)[0] for d in stated}
    lock = (REPO / "requirements.lock").read_text()
    for name, version in _constraints().items():
        assert f"\n{name}=={version} " in lock, name
    assert _constraints()["torch"] == "2.14.1" and _constraints()["torchvision"] == "0.29.1"
    assert "constraints.txt" in (REPO / "tests" / "scripts" / "lock.py").read_text()


def _build_wheel(tmp_path: Path) -> Path:
    """The wheel of a copy of the checkout's package files (pip builds in the source tree: not in the checkout)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "constraints.txt"):
        shutil.copy2(REPO / name, src / name)
    for name in ("sweep", "analysis", "search_spaces"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    # no build isolation: the build's setuptools is the project environment's, and nothing is downloaded
    subprocess.run([*pip, "wheel", str(src), "--no-deps", "--no-build-isolation", "-w", str(dist)], check=True)
    (wheel,) = dist.glob("stitchsweep-*.whl")
    return wheel


def _fresh_venv(tmp_path: Path, wheel: Path) -> Path:
    """A new virtual environment with the wheel installed, borrowing the project environment's packages
    (torch, Ray, ...) through a .pth file; its own site-packages come first."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(purelib, "_stitchsweep_project_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "--python", str(python)]
    subprocess.run([*pip, "install", "--no-deps", str(wheel)], check=True)
    return venv


# A script of a user's: the plugin study of docs/plugins.md with more trials, planned, run (interrupted by SIGINT
# once its first trial is recorded), resumed and loaded through the library.
API_SCRIPT = """
import os, signal, threading, time
from pathlib import Path

import yaml

import sweep

space = yaml.safe_load(Path("space.yaml").read_text())
points = ["layer1.0", "layer1.1", "layer2.0", "layer2.1", "layer3.0", "layer3.1"]
space["stitching"].update(stitch_points=points, objectives=["dm", "tlm"], epochs=1)
plan = sweep.plan(space)
n = len(plan.units["trial"])
trials = Path("api_results") / space["name"] / "trials"


def interrupt():
    while not any(trials.glob("*.parquet")):
        time.sleep(0.1)
    os.kill(os.getpid(), signal.SIGINT)


threading.Thread(target=interrupt, daemon=True).start()
try:
    sweep.run(space, storage="api_results", num_cpus=2)
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted")
before = sweep.status(f"api_results/{space['name']}")["kinds"]["trial"]["done"]
results = sweep.resume(f"api_results/{space['name']}")
tables = results.load()
print("trials", n, before, len(tables["trials"]), "echo", len(tables["echo"]), results.complete)
print("norm_corr", int(tables["trials"]["sim_norm_corr"].notna().sum()), sweep.__file__)
"""


@pytest.mark.slow
def test_the_wheel_installs_and_runs_outside_the_checkout(tmp_path, kind_plugin):
    wheel = _build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = email.message_from_bytes(z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))))
    requires = meta.get_all("Requires-Dist")
    pinned = [r for r in requires if "==" in r.split(";")[0]]  # (a marker's `extra == "test"` is no pin)
    assert requires and not pinned, pinned  # ranges: it installs beside a PyTorch of one's own
    assert meta["Version"] == VERSION
    assert {"sweep/py.typed", "analysis/py.typed", "sweep/spaces/quickstart.yaml"} <= names
    assert "sweep/spaces/shared/fashion_mnist_small.yaml" in names and "sweep/planning/profiles/cpu-2core.json" in names

    venv = _fresh_venv(tmp_path, wheel)
    here = tmp_path / "empty"
    here.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}

    def cli(*args, timeout=300):
        out = subprocess.run(
            [str(venv / "bin" / "stitchsweep"), *args], cwd=here, env=env, capture_output=True, text=True,
            timeout=timeout,
        )  # fmt: skip
        assert out.returncode == 0, f"stitchsweep {' '.join(args)}: {out.stderr[-3000:]}"
        return out.stdout

    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sweep, analysis; print(sweep.__file__); print(analysis.__file__)"],
        cwd=here, env=env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert all(Path(w).is_relative_to(venv) for w in where), where

    assert cli("--version").strip() == f"stitchsweep {VERSION}"
    assert cli("plan", "quickstart").startswith("sweep quickstart:")
    cli("init", "a_first_study")
    assert (here / "a_first_study.yaml").is_file() and (here / "shared" / "fashion_mnist_small.yaml").is_file()
    assert cli("plan", "a_first_study.yaml").startswith("sweep first_study:")

    # a tiny sweep end to end (digits, one donor, Ray's workers importing the installed package) and its report
    tiny = dict(TINY_SPACE, evaluation=dict(TINY_SPACE["evaluation"], n_eval_robust=0))
    (here / "tiny.yaml").write_text(yaml.safe_dump(tiny, sort_keys=False))
    cli("run", "tiny.yaml", "--storage", "results", "--num-cpus", "2", timeout=600)
    cli("report", "results/tiny", "--out", "report")
    assert (here / "report" / "index.html").is_file()
    from analysis.reading import load_trials

    rows = load_trials(here / "results" / "tiny")
    assert len(rows) == 4 and set(rows["stitchsweep_version"]) == {VERSION}

    # the library: a plugin study planned, run, interrupted, resumed and loaded (the plugins kept with it)
    study = kind_plugin(here / "study")
    (study / "api.py").write_text(API_SCRIPT)
    out = subprocess.run(
        [str(venv / "bin" / "python"), "api.py"], cwd=study, env=env, capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert "interrupted" in out.stdout.splitlines()
    n, before, after, _, echo, complete = lines["trials"].split()
    assert int(n) == 12 and 0 < int(before) < 12 and int(after) == 12 and int(echo) == 3 and complete == "True"
    norm_corr, where = lines["norm_corr"].split()
    assert int(norm_corr) == 12 and Path(where).is_relative_to(venv)
    # a notebook's reader in a fresh process reads the plugin kind's table from the sweep's kept plugins
    read = "import analysis; t = analysis.load('api_results/echo_study'); print(len(t['echo']))"
    shown = subprocess.run(
        [str(venv / "bin" / "python"), "-c", read], cwd=study, env=env, capture_output=True, text=True, check=True
    )
    assert shown.stdout.split()[-1] == "3"
