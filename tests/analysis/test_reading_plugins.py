"""A notebook's `analysis.load(RESULTS)` imports the plugins the sweep kept (`RESULTS/space.yaml`'s `plugins:`,
the copies under `RESULTS/plugins/`), so that a plugin kind's table and a plugin index's columns are read as
`stitchsweep report` reads them; `plugins=` names others, `plugins=[]`/False none; a plugin that does not import
is a warning and the rest loads.

The results are laid out as `run` leaves them, with docs/plugins.md's kind `echo` and index `norm_corr`; each
reading runs in a fresh interpreter, whose registries start without the plugins."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

SWEEP = "echo_study"
NUMBERS = (0, 1, 2)  # the echo units written: value = number x 2
SIM = 0.75  # the trial's sim_norm_corr


@pytest.fixture
def results(tmp_path, kind_plugin) -> Path:
    """`RESULTS/echo_study` as `run` leaves it: its space.yaml listing the kept copies of `echo/` and
    `my_index.py` under `plugins/`, three parts of the `echo` table and a trial's part with `sim_norm_corr`
    (written with the plugins imported in this process; the fixtures forget them after the test)."""
    from sweep.config.plugins import load_plugins
    from sweep.store.results import write_rows
    from sweep.store.schema import schema

    study = kind_plugin(tmp_path / "study")
    sweep = tmp_path / "results" / SWEEP
    shutil.copytree(study / "echo", sweep / "plugins" / "echo")
    shutil.copy(study / "my_index.py", sweep / "plugins" / "my_index.py")
    space = yaml.safe_load((study / "space.yaml").read_text())
    space["plugins"] = ["plugins/echo/", "plugins/my_index.py"]
    (sweep / "space.yaml").write_text(yaml.safe_dump(space, sort_keys=False))

    load_plugins(space["plugins"], sweep)
    for n in NUMBERS:
        row = dict(unit_id=f"u{n}", status="done", sweep=SWEEP, number=n, factor=2, value=2 * n)
        write_rows(sweep / "echo" / f"u{n}.parquet", [row], schema("echo"))
    trial = dict(trial_id="t0", status="done", sweep=SWEEP, sim_norm_corr=SIM)
    write_rows(sweep / "trials" / "t0.parquet", [trial], schema("trials"))
    return sweep


def fresh(code: str, cwd: Path = REPO) -> dict:
    """Run `code` in a fresh interpreter, `analysis` imported, in `cwd`; `code` binds `out` (a dict), returned
    with `warnings` (the messages of every warning raised) and `torch` (whether PyTorch was imported)."""
    program = (
        "import json, sys, warnings\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import analysis\n"
        + "".join(f"    {line}\n" for line in code.strip().splitlines())
        + "out['warnings'] = [str(w.message) for w in caught]\n"
        "out['torch'] = 'torch' in sys.modules\n"
        "print(json.dumps(out, default=str))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


READ = """
def read(tables):
    echo = tables.get("echo")
    trials = tables["trials"]
    return {
        "echo": None if echo is None else sorted(echo["value"].tolist()),
        "sim": trials["sim_norm_corr"].tolist() if "sim_norm_corr" in trials else None,
        "problems": len(tables["problems"]),
    }
"""


def test_load_imports_the_plugins_the_sweep_kept(results):
    out = fresh(
        f"""
{READ}
RESULTS = {str(results)!r}
out = {{"first": read(analysis.load(RESULTS))}}
out["again"] = read(analysis.load(RESULTS))  # the same kept plugins imported again: no error
data = analysis.report_data(RESULTS)
out["report_data"] = sorted(data.table("echo")["value"].tolist())
out["of"] = len(data.of("echo"))
out["read_table"] = analysis.read_table(RESULTS, "echo").num_rows
from sweep.store.schema import column_names
out["in_schema"] = "sim_norm_corr" in column_names("trials")  # the index's column, where the report looks
"""
    )
    expected = {"echo": [2 * n for n in NUMBERS], "sim": [SIM], "problems": 0}
    assert out["first"] == expected and out["again"] == expected
    assert out["report_data"] == expected["echo"] and out["of"] == len(NUMBERS)
    assert out["read_table"] == len(NUMBERS) and out["in_schema"]
    assert out["warnings"] == []
    assert not out["torch"]  # the index imports PyTorch inside its function only


def test_a_plugin_kinds_table_is_read_by_name_alone(results):
    out = fresh(
        f"""
out = {{"rows": analysis.read_table({str(results)!r}, "echo").num_rows}}
from sweep.registry import KINDS
out["echo"] = "echo" in KINDS
"""
    )
    assert out == {"rows": len(NUMBERS), "echo": True, "warnings": [], "torch": False}


@pytest.mark.parametrize("none", ["[]", "False"])
def test_plugins_empty_or_false_imports_none(results, none):
    out = fresh(
        f"""
{READ}
out = read(analysis.load({str(results)!r}, plugins={none}))
from sweep.registry import KINDS
from sweep.store.catalogue import INDEX_CATALOGUE
out["registered"] = ["echo" in KINDS, "norm_corr" in INDEX_CATALOGUE]
"""
    )
    assert out["echo"] is None and out["registered"] == [False, False]
    assert out["warnings"] == []  # the trial's sim_norm_corr is still kept, as any column beyond the schema is


def test_plugins_given_replace_the_kept_ones(results, tmp_path):
    """`plugins=[...]` as `--plugin` takes them: relative to the working directory; the kept ones not imported."""
    out = fresh(
        f"""
{READ}
out = read(analysis.load({str(results)!r}, plugins=["study/my_index.py"]))
from sweep.store.catalogue import INDEX_CATALOGUE
out["index"] = "norm_corr" in INDEX_CATALOGUE
""",
        cwd=tmp_path,
    )
    assert out["echo"] is None and out["index"] and out["sim"] == [SIM]
    assert out["warnings"] == []


def test_a_broken_plugin_is_a_warning_and_the_rest_loads(results):
    (results / "plugins" / "broken_plug.py").write_text("import no_such_module_here\n")
    space = yaml.safe_load((results / "space.yaml").read_text())
    space["plugins"] = ["plugins/broken_plug.py", *space["plugins"], "plugins/gone.py"]
    (results / "space.yaml").write_text(yaml.safe_dump(space, sort_keys=False))
    out = fresh(
        f"""
{READ}
out = read(analysis.load({str(results)!r}))
"""
    )
    assert out["echo"] == [2 * n for n in NUMBERS] and out["sim"] == [SIM]
    broken, gone = out["warnings"]
    assert "plugins/broken_plug.py" in broken and "ModuleNotFoundError" in broken and "no_such_module_here" in broken
    assert "plugins/gone.py" in gone and "no such file" in gone


def test_results_without_a_space_import_nothing(tmp_path):
    from sweep.store.results import write_rows
    from sweep.store.schema import schema

    bare = tmp_path / "bare"
    write_rows(bare / "trials" / "t0.parquet", [dict(trial_id="t0", status="done")], schema("trials"))
    (bare / "plugins").mkdir()
    (bare / "plugins" / "never_imported.py").write_text("raise RuntimeError('imported')\n")
    out = fresh(
        f"""
tables = analysis.load({str(bare)!r})
out = {{"trials": len(tables["trials"]), "module": "never_imported" in sys.modules}}
"""
    )
    assert out == {"trials": 1, "module": False, "warnings": [], "torch": False}


def test_results_on_other_storage_import_local_copies_of_their_plugins(results, tmp_path):
    """A `Loc` of a filesystem other than the local one (as `s3://...` is): its plugins are copied here first."""
    out = fresh(
        f"""
{READ}
import pyarrow.fs as pafs
from sweep.store.storage import Loc
fs = pafs.SubTreeFileSystem({str(tmp_path)!r}, pafs.LocalFileSystem())
root = Loc(fs, "results/{SWEEP}")
assert not root.is_local
out = read(analysis.load(root))
import echo
out["from"] = echo.__file__
"""
    )
    assert out["echo"] == [2 * n for n in NUMBERS] and out["sim"] == [SIM]
    assert not Path(out["from"]).is_relative_to(tmp_path)  # imported from the local copy
    assert out["warnings"] == []
