"""Hints that point the right way: a mistake a user makes in their own study gets the field or value they
meant (a misspelt field, a dataset's other name, a REF without its source), the file and line it is in (an
included file, an unclosed bracket), and a position that is in the file (a family's, not a generated name)."""

import copy

import pytest
import yaml

from sweep.config.errors import SpecError
from sweep.config.space import load_space, parse_space
from sweep.registry import DATASETS, Registry, did_you_mean

STUDY = {
    "name": "study",
    "donors": {
        "net": {
            "vary": {"seed": [0, 1]},
            "name": "net_s{seed}",
            "donor": {"arch": "resnet_tiny", "epochs": 1, "seed": "{seed}"},
        }
    },
    "stitching": {
        "pairs": [{"zip": {"front": {"name": "net_s0"}, "end": {"name": "net_s1"}}}],
        "stitch_points": "all",
        "objectives": ["tlm", "dm"],
    },
    "evaluation": {"n_eval_robust": 0},
}
DATA = {"data": {"dataset": "digits", "val_size": 200}}


def _error(space: dict) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_space(space)
    assert "\n" not in str(info.value)
    return info.value


def _study(**changes) -> dict:
    space = copy.deepcopy({**STUDY, **DATA})
    for dotted, value in changes.items():
        *at, key = dotted.split("__")
        node = space
        for k in at:
            node = node[k]
        node[key] = value
    return space


def test_the_study_plans():
    assert len(parse_space(_study()).trials) == 2 * 6  # tlm and dm at the six stitch points of s0 -> s1


@pytest.mark.parametrize(
    "written,meant,section",
    [("stitch_point", "stitch_points", "stitching"), ("dm_sample", "dm_samples", "stitching"),
     ("trian_size", "train_size", "data"), ("n_eval_robst", "n_eval_robust", "evaluation")],
)  # fmt: skip
def test_a_misspelt_field_gets_the_field_meant(written, meant, section):
    space = _study()
    space[section][written] = space[section].pop(meant, 100)
    err = _error(space)
    assert err.field == f"{section}.{written}"
    assert err.hint == f"unknown field: did you mean {meant!r}?"


def test_a_field_like_no_other_still_says_it_is_unknown():
    err = _error(_study(stitching__zzz=1))
    assert err.field == "stitching.zzz" and err.hint == "unknown field: misspelt?"


def test_a_misspelt_field_of_a_family_member_gets_the_field_meant():
    err = _error(_study(donors__net__donor={"arch": "resnet_tiny", "epochs": 1, "sed": "{seed}"}))
    assert err.field.startswith("donors.net.donor.sed ") and err.hint == "unknown field: did you mean 'seed'?"


@pytest.mark.parametrize(
    "written,meant",
    [("fmnist", "fashion_mnist"), ("FashionMNIST", "fashion_mnist"), ("CIFAR-10", "cifar10"), ("mnsit", "mnist"),
     ("imagenet1k", "imagenet")],
)  # fmt: skip
def test_a_dataset_by_another_name_gets_the_registered_one(written, meant):
    err = _error(_study(data__dataset=written))
    assert err.field == "data.dataset" and err.hint == f"did you mean {meant!r}?"


def test_aliases_and_substrings_serve_every_registry():
    shapes = Registry("shape")
    for name in ("circle", "square_tile", "large_square_tile"):
        shapes.add(name, name)
    shapes.alias("circle", "disc")
    assert did_you_mean("disc", shapes) == "did you mean 'circle'?"
    assert did_you_mean("DISC", shapes) == "did you mean 'circle'?"
    assert did_you_mean("Square", shapes) == "did you mean 'square_tile' or 'large_square_tile'?"  # within them
    assert did_you_mean("squaretile", shapes) == "did you mean 'square_tile'?"  # written otherwise
    assert did_you_mean("triangle", shapes) == ""
    assert did_you_mean("disc", ["square_tile"]) == ""  # an alias of a name that is not among those valid here
    with pytest.raises(KeyError, match=r"unknown shape 'disc'.*did you mean 'circle'"):
        shapes["disc"]
    assert "fmnist" not in DATASETS  # an alias is a hint, never a valid name


def test_a_donor_name_without_its_source_gets_the_ref():
    err = _error(_study(stitching__pairs=[{"front": "net_s0", "end": "zoo:net_s1"}]))
    assert err.field == "stitching.pairs[0].front" and err.hint == "did you mean 'zoo:net_s0'?"
    err = _error(_study(stitching__pairs=[{"front": "zoo:net_s0", "end": "net_1"}]))  # misspelt too
    assert err.field == "stitching.pairs[0].end" and err.hint == "did you mean 'zoo:net_s1'?"
    space = _study(tsne=[{"donors": ["net_s1"]}])
    err = _error(space)
    assert err.field == "tsne[0].donors[0]" and err.hint == "did you mean 'zoo:net_s1'?"


def test_an_error_in_a_family_is_named_at_the_familys_position():
    err = _error(_study(donors__net__donor={"arch": "resnet_tin", "epochs": 1, "seed": "{seed}"}))
    assert err.field == "donors.net.donor.arch (family 'net', generated donor 'net_s0')"
    assert err.hint == "did you mean 'resnet_tiny'?" and err.found == "resnet_tin"
    # the same when a selection by field parses the members before the donors section is read
    space = _study(donors__net__donor={"arch": "resnet_tiny", "epochs": 0, "seed": "{seed}"})
    space["tsne"] = [{"donors": {"arch": "resnet_tiny"}}]
    assert _error(space).field == "donors.net.donor.epochs (family 'net', generated donor 'net_s0')"
    # a single donor keeps its own name
    space = _study()
    space["donors"]["lone"] = {"arch": "resnet_tin", "epochs": 1}
    assert _error(space).field == "donors.lone.arch"


def _files(tmp_path, data_text: str, own: dict | None = None):
    (tmp_path / "shared").mkdir(exist_ok=True)
    (tmp_path / "shared" / "data.yaml").write_text(data_text)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump({"include": "shared/data.yaml", **copy.deepcopy(STUDY), **(own or {})}))
    return path


def test_a_mistake_in_an_included_file_names_the_file_and_line(tmp_path):
    text = "# the data every study of ours shares\ndata:\n  dataset: digits\n  trian_size: 500\n"
    with pytest.raises(SpecError) as info:
        load_space(_files(tmp_path, text))
    assert info.value.field == "shared/data.yaml, line 4: data.trian_size"
    assert "did you mean 'train_size'?" in str(info.value)
    # the including file overrides one field: a mistake there is its own (no file named), one here the include's
    text = "data:\n  dataset: fmnist\n  val_size: 200\n"
    with pytest.raises(SpecError) as info:
        load_space(_files(tmp_path, text, {"data": {"val_size": 100}}))
    assert info.value.field == "shared/data.yaml, line 2: data.dataset"
    with pytest.raises(SpecError) as info:
        load_space(_files(tmp_path, "data: {dataset: digits}\n", {"data": {"val_size": "many"}}))
    assert info.value.field == "data.val_size"


def test_an_included_value_the_including_file_replaces_is_not_blamed(tmp_path):
    """A list the including file writes replaces the included one: an error inside it is the including file's."""
    text = "data: {dataset: digits, val_size: 200}\nstitching:\n  pairs: [{front: zoo:net_s0, end: zoo:net_s1}]\n"
    own = {"stitching": {**STUDY["stitching"], "pairs": [{"front": "net_s0", "end": "zoo:net_s1"}]}}
    with pytest.raises(SpecError) as info:
        load_space(_files(tmp_path, text, own))
    assert info.value.field == "stitching.pairs[0].front"


@pytest.mark.parametrize(
    "text,opened,what",
    [("objectives: [tlm, dm\nseeds: [0]\n", 1, "flow sequence"),
     ("name: s\ndonors: {a: {arch: resnet_tiny, epochs: 1}\nstitching: {}\n", 2, "flow mapping")],
)  # fmt: skip
def test_an_unclosed_bracket_names_the_line_it_opened_on(tmp_path, text, opened, what):
    path = tmp_path / "space.yaml"
    path.write_text("# a study\n" + text)
    with pytest.raises(SpecError) as info:
        load_space(path)
    assert info.value.expected == "valid YAML"
    assert info.value.found.startswith(f"a {what} opened at line {opened + 1}, column ")
