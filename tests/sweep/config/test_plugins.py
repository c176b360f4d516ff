"""Plugins named by a space (`plugins:`) or by `--plugin`: imported before validation, their failures one line,
their versions part of the ids of the units that use them and of no other unit."""

import sys
import uuid

import pytest
import yaml

from sweep.cli import main
from sweep.config.errors import SpecError
from sweep.config.plugins import load_plugins, source_version
from sweep.config.space import load_space, with_plugins
from sweep.registry import EXPLICIT, OBJECTIVES, ORIGINS, PLUGIN_VERSIONS, versions_of
from tests.conftest import TINY_SPACE

PLUGIN = """
from sweep.stitching.declared import register_objective


@register_objective("{name}", {{"dm_samples"}}, "a plugin's objective")
def fit(ctx):
    raise NotImplementedError
"""


@pytest.fixture
def plugin(tmp_path):
    """A plugin file registering an objective under a fresh name (registries are per process), and a space next
    to it whose trials use it and a shipped objective; everything it registered is removed afterwards."""
    module, name = f"plug_{uuid.uuid4().hex[:8]}", f"obj_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(PLUGIN.format(name=name))
    space = dict(TINY_SPACE, plugins=[f"{module}.py"])
    space["stitching"] = dict(TINY_SPACE["stitching"], objectives=["dm", name], stitch_points=["layer1.0"])
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(space))
    yield tmp_path, module, name
    if name in OBJECTIVES._entries:
        OBJECTIVES.remove(name)
    sys.modules.pop(module, None)
    PLUGIN_VERSIONS.pop(module, None)


def _ids(sweep, objective: str) -> set[str]:
    return {t.trial_id for t in sweep.trials if t.objective == objective}


def test_a_space_s_plugin_is_imported_before_validation_and_versions_only_its_units(plugin):
    folder, module, name = plugin
    sweep = load_space(folder / "space.yaml")
    assert [(p.module, p.version) for p in sweep.plugins] == [
        (module, source_version((folder / f"{module}.py").read_bytes()))
    ]
    assert ORIGINS[("objective", name)] == module
    shipped = load_space_without(folder, name)
    assert _ids(sweep, "dm") == _ids(shipped, "dm")  # the shipped objective's trials keep their ids
    before = _ids(sweep, name)
    PLUGIN_VERSIONS[module] = "edited"  # what an edited plugin file gives
    again = load_space_without(folder, None)
    assert _ids(again, "dm") == _ids(sweep, "dm")
    assert len(_ids(again, name)) == len(before) == 1 and not _ids(again, name) & before


def load_space_without(folder, objective):
    """The space parsed again without re-importing the plugin (already imported), optionally without
    `objective`'s trials."""
    from sweep.config.space import parse_space

    raw = yaml.safe_load((folder / "space.yaml").read_text())
    del raw["plugins"]
    if objective:
        raw["stitching"]["objectives"] = [o for o in raw["stitching"]["objectives"] if o != objective]
    return parse_space(raw)


def test_the_version_is_the_source_hash_or_the_plugin_s_own_string():
    assert source_version(b"x = 1\n") != source_version(b"x = 2\n")
    assert source_version(b"x = 1\n") == source_version(b"x = 1\n")
    assert source_version(b'PLUGIN_VERSION = "v3"\nx = 2\n') == "v3" == source_version(b'PLUGIN_VERSION = "v3"\n')


def test_an_explicit_version_passed_to_the_register_call_enters_the_hash():
    assert versions_of({"objective": "dm"}) == {}  # shipped: no version
    OBJECTIVES.add("obj_explicit", object(), version="2")
    try:
        assert versions_of({"objective": "obj_explicit", "other": ["dm"]}) == {"objective:obj_explicit": "2"}
    finally:
        OBJECTIVES.remove("obj_explicit")
    assert ("objective", "obj_explicit") not in EXPLICIT and versions_of({"objective": "obj_explicit"}) == {}


def test_a_plugin_that_fails_to_import_is_one_line_naming_it(tmp_path, capsys):
    (tmp_path / "broken_plugin.py").write_text("import math\n\nraise RuntimeError('no GPU here')\n")
    with pytest.raises(SpecError, match=r"plugins\[0\].*broken_plugin.py.*RuntimeError: no GPU here"):
        load_plugins(["broken_plugin.py"], tmp_path)
    assert "broken_plugin" not in sys.modules
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(TINY_SPACE))
    assert main(["plan", str(tmp_path / "space.yaml"), "--plugin", str(tmp_path / "broken_plugin.py")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--plugin[0]" in err and "RuntimeError: no GPU here" in err, err


@pytest.mark.parametrize(
    ("plugins", "found"),
    [
        ("my.py", "a list of plugins"),
        ([3], "3"),
        (["missing.py"], "no such file"),
        (["no_such_mod_x"], "ModuleNotFoundError"),
    ],
)
def test_a_bad_plugins_field_names_the_field(tmp_path, plugins, found):
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(dict(TINY_SPACE, plugins=plugins)))
    with pytest.raises(SpecError, match="plugins") as err:
        load_space(tmp_path / "space.yaml")
    assert found in str(err.value)


def test_plugin_arguments_join_the_space_s_list_files_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    raw = with_plugins({"plugins": ["a.py"]}, ["b.py", "mylab.indices", "a.py"])
    assert raw["plugins"] == ["a.py", str(tmp_path / "b.py"), "mylab.indices", str(tmp_path / "a.py")]
    assert with_plugins({"name": "x"}, []) == {"name": "x"}


def test_plan_takes_plugin_arguments(plugin, capsys):
    folder, module, name = plugin
    space = yaml.safe_load((folder / "space.yaml").read_text())
    del space["plugins"]
    (folder / "bare.yaml").write_text(yaml.safe_dump(space))
    assert main(["plan", str(folder / "bare.yaml"), "--plugin", str(folder / f"{module}.py")]) == 0
    assert f"zoo:plain_a -> zoo:plain_a {name}: 1 trial" in capsys.readouterr().out


def test_the_json_schema_accepts_plugins_and_refuses_a_bare_string():
    import jsonschema

    from sweep.config.schema import space_schema

    check = jsonschema.Draft202012Validator(space_schema())
    assert not list(check.iter_errors(dict(TINY_SPACE, plugins=["my_models.py", "mylab.indices"])))
    assert list(check.iter_errors(dict(TINY_SPACE, plugins="my_models.py")))


def test_a_refused_plugin_leaves_the_loaded_one_s_version(tmp_path):
    """A second file of the same module name is refused; the version recorded stays that of the code loaded,
    so later units are hashed with the plugin that actually registered them."""
    name = f"clash_{uuid.uuid4().hex[:8]}"
    first, second = tmp_path / "a" / f"{name}.py", tmp_path / "b" / f"{name}.py"
    for path, value in ((first, 1), (second, 2)):
        path.parent.mkdir()
        path.write_text(f"VALUE = {value}\n")
    try:
        load_plugins([str(first)], tmp_path)
        with pytest.raises(SpecError, match="whose name no other module has"):
            load_plugins([str(second)], tmp_path)
        assert PLUGIN_VERSIONS[name] == source_version(first.read_bytes()) != source_version(second.read_bytes())
    finally:
        sys.modules.pop(name, None)
        PLUGIN_VERSIONS.pop(name, None)
