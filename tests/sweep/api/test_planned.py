"""`sweep.plan`: a space given as a file, a shipped name, a YAML text or a mapping, with overrides and a
selection, is the space the command line reads; `str(plan)` is what `stitchsweep plan` prints."""

import copy
import subprocess
import sys

import pytest
import yaml

import sweep
from sweep.cli import main
from sweep.config.errors import SpecError
from tests.conftest import REPO, TINY_SPACE


def test_import_sweep_exports_the_library_lazily():
    """`import sweep` loads neither torch nor Ray; the names load their modules when first read."""
    code = (
        "import sys, sweep; before = {'torch', 'ray'} & set(sys.modules); sweep.plan; sweep.register_kind; "
        "sweep.IndexEntry; print(sorted(before), 'ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "False"]
    from sweep.kinds.base import register_kind
    from sweep.measures.indices import register_index

    assert sweep.register_kind is register_kind and sweep.register_index is register_index
    assert {"plan", "run", "resume", "status", "report", "register_architecture", "register_dataset"} <= set(dir(sweep))


def test_a_mapping_a_yaml_text_and_a_file_plan_the_same_units(tmp_path):
    space = copy.deepcopy(TINY_SPACE)
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))
    plans = [sweep.plan(space), sweep.plan(path.read_text()), sweep.plan(path), sweep.plan(str(path))]
    ids = [sorted(p.units["trial"]) for p in plans]
    assert len(ids[0]) == 4 and all(i == ids[0] for i in ids)
    assert len(plans[0]) == 5  # four trials and their donor


def test_overrides_and_a_selection_as_on_the_command_line(capsys, tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY_SPACE, sort_keys=False))
    plan = sweep.plan(path, overrides=["stitching.objectives=[dm]"], only="stitch_point=layer1.*")
    assert [u.objective for u in plan.units["trial"].values()] == ["dm"]
    assert main(["plan", str(path), "stitching.objectives=[dm]", "--only", "stitch_point=layer1.*"]) == 0
    assert capsys.readouterr().out.strip() == str(plan).strip()


def test_a_shipped_space_by_name_with_its_estimate():
    plan = sweep.plan("quickstart", estimate=True)
    assert len(plan.units["trial"]) == 48 and plan.estimate_lines
    assert str(plan).startswith("sweep quickstart: 3 donors, 48 trials")


@pytest.mark.parametrize(
    ("space", "field"),
    [
        (42, "space"),
        ("name: x\n", "data"),  # a YAML text missing its data
        ({"name": "x", "data": {"dataset": "nope"}}, "data.dataset"),
    ],
)
def test_a_bad_space_is_a_spec_error_naming_the_field(space, field):
    with pytest.raises(SpecError) as err:
        sweep.plan(space)
    assert str(err.value).startswith(f"{field}:")


def test_an_override_that_breaks_the_space_is_named_by_the_override():
    with pytest.raises(SpecError, match=r"stitching\.epochs"):
        sweep.plan(copy.deepcopy(TINY_SPACE), overrides=["stitching.epochs=-1"])
