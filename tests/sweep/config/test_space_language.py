"""The space language: donor families, selections, pair generators and includes expand to the plain space a
user could have written by hand (each generator against a hand-written expectation), `plan --expand` prints a
space that plans to the same units, and every mistake is one line naming the field."""

import copy
import json

import pytest
import yaml

from sweep.cli import main
from sweep.config.errors import SpecError
from sweep.config.space import load_space, parse_space
from tests.conftest import REPO

SHIPPED = sorted((REPO / "search_spaces").glob("*.yaml"))  # those that plan here (golden ids: the same)
ALL_SHIPPED = sorted((REPO / "search_spaces").glob("**/*.yaml"))

# Six digits donors from two families: {arch} x {seed} plain, and robust ones tagged with their level.
FAMILY_SPACE = {
    "name": "lang",
    "data": {"dataset": "digits", "val_size": 200},
    "donors": {
        "plain": {
            "vary": {"arch": ["resnet_tiny", "wrn28_1"], "seed": [0, 1]},
            "name": "{arch}_s{seed}",
            "tags": {"level": 0},
            "donor": {"arch": "{arch}", "epochs": 1, "seed": "{seed}"},
        },
        "robust": {
            "vary": {"level": [{"level": 0.1, "e": "01"}, {"level": 0.2, "e": "02"}]},
            "name": "rob_e{e}",
            "donor": {"arch": "resnet_tiny", "training": "pgd", "eps": "{level}", "epochs": 1},
        },
    },
    "evaluation": {"n_eval_robust": 0},
}


def _space(**sections) -> dict:
    space = copy.deepcopy(FAMILY_SPACE)
    space.update(copy.deepcopy(sections))
    return space


def _pairs(sweep, section="similarity") -> list[tuple[str, str]]:
    return [(u.a, u.b) for u in sweep.units[section]]


def test_a_family_writes_out_its_donors_with_typed_values():
    sweep = parse_space(_space())
    donors = sweep.raw["donors"]
    assert list(donors) == ["resnet_tiny_s0", "resnet_tiny_s1", "wrn28_1_s0", "wrn28_1_s1", "rob_e01", "rob_e02"]
    assert donors["wrn28_1_s1"] == {"arch": "wrn28_1", "epochs": 1, "seed": 1}  # "{seed}" alone keeps the integer
    assert donors["rob_e02"] == {"arch": "resnet_tiny", "training": "pgd", "eps": 0.2, "epochs": 1}
    assert sweep.donors["rob_e01"].eps == pytest.approx(0.1)


def test_selections_by_tag_field_name_pattern_and_family():
    space = _space(
        tsne=[
            {"name": "by_tag", "donors": {"level": 0}},
            {"name": "by_field", "donors": {"arch": "wrn28_1"}},
            {"name": "by_name", "donors": {"name": "rob_*"}},
            {"name": "mixed", "donors": ["zoo:wrn28_1_s0", {"family": "robust", "level": 0.2}]},
        ]
    )
    sections = parse_space(space).raw["tsne"]
    assert sections[0]["donors"] == ["zoo:resnet_tiny_s0", "zoo:resnet_tiny_s1", "zoo:wrn28_1_s0", "zoo:wrn28_1_s1"]
    assert sections[1]["donors"] == ["zoo:wrn28_1_s0", "zoo:wrn28_1_s1"]
    assert sections[2]["donors"] == ["zoo:rob_e01", "zoo:rob_e02"]
    assert sections[3]["donors"] == ["zoo:wrn28_1_s0", "zoo:rob_e02"]


def _similarity(*entries) -> dict:
    return _space(similarity=[{"pairs": list(entries), "images": 100, "estimator": "full", "points": ["penultimate"]}])


def test_ordered_unordered_product_zip_and_diagonal_pairs():
    a, b, c, d = "zoo:resnet_tiny_s0", "zoo:resnet_tiny_s1", "zoo:wrn28_1_s0", "zoo:wrn28_1_s1"
    sel = {"name": ["resnet_tiny_s0", "resnet_tiny_s1", "wrn28_1_s0"]}
    cases = {
        "ordered": ({"ordered": sel}, [(a, b), (a, c), (b, a), (b, c), (c, a), (c, b)]),
        "ordered+self": ({"ordered": sel, "self": True}, [(x, y) for x in (a, b, c) for y in (a, b, c)]),
        "unordered": ({"unordered": sel}, [(a, b), (a, c), (b, c)]),
        "unordered+self": ({"unordered": sel, "self": True}, [(a, a), (a, b), (a, c), (b, b), (b, c), (c, c)]),
        "product": ({"product": {"a": [a, b], "b": {"arch": "wrn28_1"}}}, [(a, c), (a, d), (b, c), (b, d)]),
        "product-self": ({"product": {"a": [a, b], "b": [a, b]}, "self": False}, [(a, b), (b, a)]),
        "zip": ({"zip": {"a": [a, b], "b": [c, d]}}, [(a, c), (b, d)]),
        "diagonal": ({"diagonal": [a, c]}, [(a, a), (c, c)]),
    }  # fmt: skip
    for name, (entry, expected) in cases.items():
        assert _pairs(parse_space(_similarity(entry))) == expected, name


def test_same_and_differ_group_pairs():
    within = parse_space(_similarity({"ordered": {"name": "*"}, "same": ["level"], "differ": "arch"}))
    # level 0: the two architectures' four donors, across architectures only; the robust ones share an arch
    assert sorted(_pairs(within)) == sorted(
        (f"zoo:{x}_s{i}", f"zoo:{y}_s{j}")
        for x, y in (("resnet_tiny", "wrn28_1"), ("wrn28_1", "resnet_tiny"))
        for i in (0, 1)
        for j in (0, 1)
    )
    across = parse_space(_similarity({"ordered": {"arch": "resnet_tiny"}, "differ": ["level"], "same": ["seed"]}))
    # resnet_tiny donors: s0, s1 (level 0) and the robust two (seed 0, levels 0.1 / 0.2)
    robust = ("zoo:rob_e01", "zoo:rob_e02")
    expected = [("zoo:resnet_tiny_s0", r) for r in robust] + [(r, "zoo:resnet_tiny_s0") for r in robust]
    expected += [robust, robust[::-1]]
    assert sorted(_pairs(across)) == sorted(expected)


def test_extra_keys_of_a_generator_go_into_every_pair_and_stitching_takes_generators():
    space = _similarity({"diagonal": {"arch": "wrn28_1"}, "b_inputs": "inverted", "a_inputs": "inverted"})
    space["inversions"] = [{"name": "inv", "donors": {"arch": "wrn28_1"}, "steps": 2, "images": 100}]
    space["similarity"][0]["inverted"] = "inv"
    pairs = parse_space(space).raw["similarity"][0]["pairs"]
    assert all(p["a_inputs"] == p["b_inputs"] == "inverted" for p in pairs) and len(pairs) == 2
    block = {"pairs": [{"ordered": {"level": 0, "arch": "wrn28_1"}}], "objectives": ["dm"]}
    trials = parse_space(_space(stitching=dict(block, stitch_points=["layer1.0"]))).trials
    a, b = "zoo:wrn28_1_s0", "zoo:wrn28_1_s1"
    assert {(t.front, t.end) for t in trials} == {(a, b), (b, a)}


def test_tags_on_a_single_donor_select_and_are_not_donor_fields():
    space = _space()
    space["donors"]["lone"] = {"arch": "wrn28_1", "epochs": 2, "tags": {"level": 0.1, "kind": "odd"}}
    space["tsne"] = [{"donors": {"kind": "odd"}}, {"donors": {"level": 0.1}}]
    sweep = parse_space(space)
    assert sweep.raw["tsne"][0]["donors"] == ["zoo:lone"]
    assert sweep.raw["tsne"][1]["donors"] == ["zoo:rob_e01", "zoo:lone"]
    assert "tags" not in sweep.raw["donors"]["lone"]


def test_includes_merge_under_the_file_and_the_kept_copy_is_expanded(tmp_path):
    shared = {"data": {"dataset": "digits", "val_size": 200}, "donors": FAMILY_SPACE["donors"]}
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "donors.yaml").write_text(yaml.safe_dump(shared))
    space = {
        "include": "shared/donors.yaml",
        "name": "inc",
        "data": {"val_size": 300},  # overrides one field of the included data
        "tsne": [{"donors": {"family": "robust"}}],
        "evaluation": {"n_eval_robust": 0},
    }
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(space))
    sweep = load_space(path)
    assert sweep.data.dataset == "digits" and sweep.data.val_size == 300
    assert "include" not in sweep.raw and sweep.raw["tsne"][0]["donors"] == ["zoo:rob_e01", "zoo:rob_e02"]
    # what a run keeps reads back alone: moving the included file changes nothing recorded
    (tmp_path / "shared" / "donors.yaml").unlink()
    kept = tmp_path / "kept.yaml"
    kept.write_text(yaml.safe_dump(sweep.raw))
    assert [u.unit_id for u in load_space(kept).units["tsne"]] == [u.unit_id for u in sweep.units["tsne"]]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_plan_expand_round_trips_every_shipped_space(path, tmp_path, capsys):
    from sweep.registry import KINDS

    assert main(["plan", str(path), "--expand"]) == 0
    expanded = tmp_path / path.name
    expanded.write_text(capsys.readouterr().out)
    text = expanded.read_text()
    assert not any(f"{g}:" in text for g in ("vary", "ordered", "unordered", "product", "zip", "include"))
    before, after = load_space(path), load_space(expanded)
    for name, kind in KINDS.items():
        assert list(kind.units(after)) == list(kind.units(before)), name


def test_no_shipped_space_is_over_250_lines():
    long = {p.name: n for p in ALL_SHIPPED if (n := len(p.read_text().splitlines())) > 250}
    assert ALL_SHIPPED and not long, f"use families and generators: {long}"


def test_plan_says_what_each_generator_made(write_space, capsys):
    path = write_space(_similarity({"unordered": {"level": 0}, "same": ["arch"]}))
    assert main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "donors.plain: a family of 4 donors over arch x seed" in out
    assert "similarity[0].pairs[0]: unordered of {'level': 0}, same ['arch'] -> 2 pairs" in out


BAD = [
    # (what, change to FAMILY_SPACE-based space, the field named, words of the message)
    ("selects nothing", {"tsne": [{"donors": {"arch": "vit_tiny_cpu"}}]}, "tsne[0].donors", "matches at least one"),
    ("unknown tag", {"tsne": [{"donors": {"colour": "red"}}]}, "tsne[0].donors.colour", "a tag some donor has"),
    ("empty selection", {"tsne": [{"donors": {}}]}, "tsne[0].donors", "at least one condition"),
    ("zip lengths", {"similarity": [{"pairs": [{"zip": {"a": {"level": 0}, "b": {"family": "robust"}}}]}]},
     "similarity[0].pairs[0].zip", "one length"),
    ("no pairs", {"similarity": [{"pairs": [{"ordered": {"family": "robust"}, "same": ["level"]}]}]},
     "similarity[0].pairs[0]", "at least one pair"),
    ("two generators", {"similarity": [{"pairs": [{"ordered": {"level": 0}, "unordered": {"level": 0}}]}]},
     "similarity[0].pairs[0]", "one generator"),
    ("generator and roles", {"similarity": [{"pairs": [{"ordered": {"level": 0}, "a": "zoo:wrn28_1_s0"}]}]},
     "similarity[0].pairs[0]", "not both"),
    ("same unknown", {"similarity": [{"pairs": [{"ordered": {"level": 0}, "same": ["colour"]}]}]},
     "similarity[0].pairs[0].same", "a tag some donor has"),
]  # fmt: skip


@pytest.mark.parametrize("what,change,field,words", BAD, ids=[b[0] for b in BAD])
def test_bad_generators_name_the_field(what, change, field, words):
    with pytest.raises(SpecError) as info:
        parse_space(_space(**change))
    assert info.value.field == field and words in str(info.value)
    assert "\n" not in str(info.value)


def test_bad_families_name_the_field():
    space = _space()
    space["donors"]["plain"]["name"] = "{arch}"  # two seeds per arch: names collide
    with pytest.raises(SpecError, match="donors.plain: expected donor names that no other"):
        parse_space(space)
    space = _space()
    space["donors"]["plain"]["name"] = "{arch}_{width}"
    with pytest.raises(SpecError, match=r"donors.plain.name: expected a pattern over the variables .*\(no \{width\}\)"):
        parse_space(space)
    space = _space()
    space["donors"]["plain"]["vary"] = {"seed": []}
    with pytest.raises(SpecError, match="donors.plain.vary.seed: expected a non-empty list"):
        parse_space(space)


def test_bad_includes_name_the_file(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(yaml.safe_dump({"include": "b.yaml", "name": "a"}))
    b.write_text(yaml.safe_dump({"include": "a.yaml"}))
    with pytest.raises(SpecError, match=r"include.*cycle: a.yaml -> b.yaml -> a.yaml"):
        load_space(a)
    a.write_text(yaml.safe_dump({"include": "missing.yaml", "name": "a"}))
    with pytest.raises(SpecError, match=r"a.yaml: include: expected a search-space YAML file, found 'missing.yaml'"):
        load_space(a)
    b.write_text("data: [unclosed\n")
    a.write_text(yaml.safe_dump({"include": "b.yaml", "name": "a"}))
    with pytest.raises(SpecError, match=r"include b.yaml: expected valid YAML"):
        load_space(a)
    a.write_text(yaml.safe_dump({"include": 3, "name": "a"}))
    with pytest.raises(SpecError, match="expected a file name or a list of file names"):
        load_space(a)


def test_expand_prints_json_free_yaml_for_a_plain_space(capsys):
    """A space without generators expands to itself."""
    path = REPO / "search_spaces" / "quickstart.yaml"
    assert main(["plan", str(path), "--expand"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == json.loads(json.dumps(yaml.safe_load(path.read_text())))


def test_shared_x_blocks_serve_anchors_and_are_not_kept(write_space):
    text = """
name: shared
data: {dataset: digits, val_size: 200}
donors: {a: {arch: resnet_tiny, epochs: 1}, b: {arch: resnet_tiny, epochs: 1, seed: 1}}
x-common: &common {objectives: [dm], stitch_points: [layer1.0]}
stitching:
  - {<<: *common, pairs: [{front: zoo:a, end: zoo:b}]}
  - {<<: *common, pairs: [{front: zoo:b, end: zoo:a}], dm_samples: 50}
evaluation: {n_eval_robust: 0}
"""
    path = write_space({})
    path.write_text(text)
    sweep = load_space(path)
    assert "x-common" not in sweep.raw and sorted(t.dm_samples for t in sweep.trials) == [50, 100]
