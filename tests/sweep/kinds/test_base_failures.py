"""A unit whose own code fails (a plugin kind that raises in its run, a value that does not fit its column) is
recorded failed once, with its reason and the plugin's file and line: listed by `status`, rerun by `--failed`,
never raised to the backend (where Ray would take it for a lost worker and retry it)."""

import copy

import pyarrow as pa
import pytest
import torch

from sweep.config.space import parse_space
from sweep.kinds.base import RunContext, commit, record_unit, run_recorded
from sweep.kinds.examples.table import TABLE as EXAMPLES_DIR
from sweep.planning import planning
from sweep.planning.status import print_status
from sweep.registry import KINDS
from sweep.store.results import SweepDir, read_status
from sweep.store.schema import schema
from tests.conftest import TINY_SPACE

KIND = """
import pyarrow as pa

from sweep.kinds.base import Kind, register_kind

SCHEMA = pa.schema([("unit_id", pa.string()), ("status", pa.string()), ("error", pa.string()), ("value", pa.float64())])


def parts(sweep_dir, unit):
    return [sweep_dir.path / "{name}" / f"{{unit}}.parquet"]


def run(unit, ctx):
    if unit == "u1":
        raise ValueError("u1 is not ready")  # the plugin's bug
    from sweep.store.results import write_rows

    write_rows(parts(ctx.sweep_dir, unit)[0], [{{"unit_id": unit, "status": "done", "value": 1.0}}], SCHEMA)
    return {{"status": "done"}}


register_kind(
    Kind(
        "{name}", "{name}", "{name} units", "{name}", parts, run, lambda u: f"{name} {{u}}", section="{name}",
        parse=lambda raw, ctx: ("u0", "u1"), unit_id=lambda u: u, schema=SCHEMA,
    )
)
"""


def test_a_plugin_kind_that_raises_is_recorded_failed_with_its_line_listed_and_rerun(plugin_file, tmp_path, capsys):
    list(KINDS)  # the shipped kinds first
    path, module = plugin_file(KIND.format(name="fragile"))
    line = next(i + 1 for i, text in enumerate(path.read_text().splitlines()) if "u1 is not ready" in text)
    space = dict(copy.deepcopy(TINY_SPACE), fragile={})
    del space["stitching"]
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    ctx = RunContext(sweep_dir, torch.device("cpu"))
    kind = KINDS["fragile"]
    outs = [run_recorded(kind, unit, ctx) for unit in sweep.units["fragile"]]  # does not raise
    assert [o["status"] for o in outs] == ["done", "failed"]
    assert outs[1]["error"] == f"ValueError: u1 is not ready (at {module}.py:{line} in run)"
    (part,) = kind.parts(sweep_dir, "u1")
    assert read_status(part) == "failed" and planning.read_error(part) == outs[1]["error"]

    assert not print_status(sweep, sweep_dir)  # exit code 1: the sweep is not complete
    out = capsys.readouterr().out
    assert "2 fragile units: 1 done, 1 failed, 0 pending" in out and "u1 is not ready" in out, out
    assert planning.to_run(sweep, sweep_dir, retry_failed=False)["fragile"] == []  # recorded: not retried
    assert planning.to_run(sweep, sweep_dir, retry_failed=True)["fragile"] == ["u1"]  # until --failed


def test_a_value_that_does_not_fit_its_column_fails_the_unit_naming_the_column(tmp_path):
    part = SweepDir(tmp_path, "s").part(EXAMPLES_DIR, "u1")
    out = record_unit(part, EXAMPLES_DIR, {"unit_id": "u1"}, lambda: [{"name": [1.0, 2.0]}])  # a list for a string
    assert out["status"] == "failed" and read_status(part) == "failed"
    assert out["error"].startswith("writing its row: ValueError: column 'name': expected string, found list")


def test_commit_writes_the_rows_that_fit_and_raises_when_even_the_failed_row_cannot_be_written(tmp_path):
    table = pa.schema([("unit_id", pa.string()), ("status", pa.string()), ("error", pa.string())])
    part = SweepDir(tmp_path, "s").part(EXAMPLES_DIR, "u1")
    assert commit(part, [{"unit_id": "u1", "status": "done"}], table, {"unit_id": "u1"})[0]["status"] == "done"
    with pytest.raises(ValueError, match="column 'unit_id'"):  # the engine's own failed row: not hidden
        commit(SweepDir(tmp_path, "t").part(EXAMPLES_DIR, "u1"), [{"unit_id": 1.5}], table, {"unit_id": [1]})
    assert schema(EXAMPLES_DIR).field("status").type == pa.string()


def test_an_object_store_that_kept_failing_is_no_failure_of_the_unit(tmp_path):
    """A part write that ran out of the store's retries leaves the unit pending (raised, not recorded failed)."""
    from sweep.store.retry import StoreUnavailable

    part = SweepDir(tmp_path, "s").part(EXAMPLES_DIR, "u1")

    def measure():
        try:
            raise StoreUnavailable("s3://b/s/examples", 7, 12.0, OSError("AWS Error SLOW_DOWN"))
        except StoreUnavailable as exc:
            raise RuntimeError("while writing") from exc  # however a unit's code wrapped it

    with pytest.raises(StoreUnavailable, match="expected the object store to answer"):
        record_unit(part, EXAMPLES_DIR, {"unit_id": "u1"}, measure)
    assert not part.exists()  # nothing recorded: the unit stays pending
