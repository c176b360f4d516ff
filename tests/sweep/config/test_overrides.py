"""Command-line overrides in Hydra's grammar: they change the plan, are validated like the file, and an error
names the override it comes from."""

import json

import pytest
import yaml

from sweep.cli import main
from sweep.config.errors import SpecError
from sweep.config.overrides import parse_override
from sweep.config.space import load_space


def test_overrides_replace_add_and_delete_keys_and_change_the_plan(tiny_space, write_space):
    space = write_space(tiny_space)
    plain = load_space(space)
    seeds = load_space(space, ["stitching.epochs=3", "+stitching.seeds=[0,1,2]", "+stitching.indices=[cka]"])
    tlm = [t for t in seeds.trials if t.objective == "tlm"]  # dm has no seed of its own: one per point
    assert len(tlm) == 6 and {t.seed for t in tlm} == {0, 1, 2} and len(seeds.trials) > len(plain.trials)
    assert {t.epochs for t in tlm} == {3} and {t.indices for t in seeds.trials} == {("cka",)}
    assert {t.trial_id for t in seeds.trials}.isdisjoint(t.trial_id for t in plain.trials)
    one = load_space(space, ["stitching.objectives=[dm]", "~stitching.dm_samples", "name=other"])
    assert one.name == "other" and {t.objective for t in one.trials} == {"dm"}
    assert one.raw["name"] == "other" and "dm_samples" not in one.raw["stitching"]  # what `run` saves
    assert load_space(space, ["stitching.pairs.0.end=zoo:plain_a"]).trials == plain.trials  # a list's index
    assert "epochs" in tiny_space["stitching"]  # the file's mapping is not changed


@pytest.mark.parametrize(
    "override, message",
    [
        ("stitching.epochs=x", "override 'stitching.epochs=x': stitching.epochs: expected an integer"),
        ("stitching.objectives=[tlm, nope]", "override 'stitching.objectives=[tlm, nope]': stitching.objectives[1]"),
        ("stitching.epoch=3", "found 'epoch' (did you mean stitching.epochs?)"),
        ("stitching.seeds=[0,1]", "found 'seeds' (to add it: +stitching.seeds=[0,1])"),
        ("+stitching.epochs=3", "it is present; to replace it: stitching.epochs=3"),
        ("~stitching.objectives", "override '~stitching.objectives': stitching.objectives: expected a list"),
        ("stitching.epochs=[1", "override 'stitching.epochs=[1': expected a YAML value"),
        ("stitching.epochs", "expected key.path=value, +key.path=value or ~key.path"),
        ("name.x=1", "expected name to be a mapping"),
    ],
)
def test_an_invalid_override_is_refused_naming_it(tiny_space, write_space, override, message):
    with pytest.raises(SpecError) as err:
        load_space(write_space(tiny_space), [override])
    assert message in str(err.value)


def test_an_override_of_an_included_field_is_named_by_the_override(tiny_space, write_space, tmp_path):
    base = {k: v for k, v in tiny_space.items() if k != "stitching"}
    write_space(base, "base.yaml")
    space = write_space({"include": "base.yaml", "stitching": tiny_space["stitching"]})
    assert len(load_space(space, ["donors.plain_a.seed=1"]).trials) == 4
    with pytest.raises(SpecError, match=r"^override 'donors.plain_a.epochs=0': donors.plain_a.epochs"):
        load_space(space, ["donors.plain_a.epochs=0"])


def test_values_are_yaml_flow_scalars_and_collections():
    assert parse_override("a.b=[0, 1]").value == [0, 1]
    assert parse_override("+a={x: 1}").value == {"x": 1} and parse_override("+a=1").op == "add"
    assert parse_override("a=null").value is None and parse_override("a=0.5").value == 0.5
    assert parse_override("a=layer2.0").value == "layer2.0" and parse_override("++a=1").op == "force"
    assert parse_override("~a.b").op == "delete"


def test_plan_takes_overrides_before_or_after_its_options_and_expand_shows_them(tiny_space, write_space, capsys):
    space = str(write_space(tiny_space))
    assert main(["plan", space, "--expand", "stitching.epochs=7", "name=seven"]) == 0
    expanded = yaml.safe_load(capsys.readouterr().out)
    assert expanded["stitching"]["epochs"] == 7 and expanded["name"] == "seven"
    assert main(["plan", space, "+stitching.seeds=[0,1]", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kinds"]["trial"]["count"] == 6
    assert main(["plan", space, "stitching.epochs=x"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("stitchsweep: error: override 'stitching.epochs=x': stitching.epochs:")
        and len(err.splitlines()) == 1
    )


def _two_blocks(space: dict) -> dict:
    """`space` with its stitching a list of two blocks (the second: dm at one point)."""
    first = space["stitching"]
    space["stitching"] = [first, dict(first, objectives=["dm"], stitch_points=["layer1.0"])]
    return space


def test_a_key_of_a_list_of_blocks_is_refused_with_the_paths_into_it(tiny_space, write_space, capsys):
    space = str(write_space(_two_blocks(tiny_space)))
    assert main(["plan", space, "stitching.epochs=2"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "zoo:plain_a" not in err  # not the whole list
    assert err.rstrip().endswith(
        "expected stitching to be a mapping, found a list of 2 items"
        " (stitching.0.epochs=2 for item 0, stitching.*.epochs=2 for every item)"
    )


def test_a_star_applies_the_override_to_every_block(tiny_space, write_space):
    space = write_space(_two_blocks(tiny_space))
    sweep = load_space(space, ["stitching.*.epochs=3", "+stitching.*.seeds=[0,1]", "~stitching.*.dm_samples"])
    assert {t.epochs for t in sweep.trials if t.objective == "tlm"} == {3}  # dm is fitted, with no epochs
    assert {b["epochs"] for b in sweep.raw["stitching"]} == {3}
    assert all(b["seeds"] == [0, 1] and "dm_samples" not in b for b in sweep.raw["stitching"])
    forced = load_space(space, ["++stitching.*.lr=0.5", "++stitching.*.indices=[cka]"])
    assert {t.indices for t in forced.trials} == {("cka",)} and {b["lr"] for b in forced.raw["stitching"]} == {0.5}
    with pytest.raises(SpecError, match=r"^override 'stitching.\*.epochs=x': stitching\[0\].epochs: expected an int"):
        load_space(space, ["stitching.*.epochs=x"])


def test_a_star_names_the_item_that_lacks_the_key(tiny_space, write_space):
    space = _two_blocks(tiny_space)
    del space["stitching"][1]["dm_samples"]
    with pytest.raises(SpecError) as err:
        load_space(write_space(space), ["stitching.*.dm_samples=50"])
    assert str(err.value).startswith("override 'stitching.*.dm_samples=50': expected a key of stitching.1 (")
    assert "found 'dm_samples' (to add it: +stitching.*.dm_samples=50)" in str(err.value)
    with pytest.raises(SpecError, match=r"found 'stitching.0.epochs' \(it is present; to replace it: stitching"):
        load_space(write_space(space), ["+stitching.*.epochs=2"])


def test_a_star_on_a_mapping_applies_to_each_value(tiny_space, write_space):
    tiny_space["donors"]["plain_b"] = dict(tiny_space["donors"]["plain_a"], seed=1)
    sweep = load_space(write_space(tiny_space), ["donors.*.epochs=2"])
    assert [d["epochs"] for d in sweep.raw["donors"].values()] == [2, 2]
    assert parse_override("~donors.*.noise").path == ("donors", "*", "noise")
    for text in ("donors.*=1", "*.seed=1"):  # `*` stands before a key, after the section
        with pytest.raises(SpecError, match="'\\*' for every item"):
            parse_override(text)
    with pytest.raises(SpecError, match=r"expected name to be a list or a mapping \(for '\*'\), found 'tiny'"):
        load_space(write_space(tiny_space), ["name.*.x=1"])
