"""`stitchsweep schema`: a valid JSON Schema, generated from the validator's own declarations, that accepts
every shipped space and the docs' reference, and rejects a sample of the mistakes the validator rejects."""

import copy
import json
import re

import jsonschema
import pytest
import yaml

from sweep.cli import main
from sweep.config.errors import SpecError
from sweep.config.fields import Option
from sweep.config.schema import space_schema
from sweep.config.sources import DonorSource
from sweep.config.space import parse_space
from sweep.registry import DONOR_SOURCES
from tests.conftest import REPO, TINY_SPACE

# the spaces; `shared/` holds blocks that spaces include, checked as part of the spaces that include them
SPACES = sorted(p for p in (REPO / "search_spaces").glob("**/*.yaml") if p.parent.name != "shared")


@pytest.fixture(scope="module")
def validator():
    schema = space_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_command_prints_the_schema(capsys):
    assert main(["schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(json.dumps(space_schema()))
    assert printed["$schema"].startswith("https://json-schema.org/")


@pytest.mark.parametrize("path", SPACES, ids=lambda p: p.name)
def test_every_shipped_space_is_valid(path, validator):
    errors = [
        f"{list(e.absolute_path)}: {e.message[:200]}" for e in validator.iter_errors(yaml.safe_load(path.read_text()))
    ]
    assert not errors, errors


def test_the_docs_reference_space_is_valid(validator):
    text = (REPO / "docs" / "search-spaces.md").read_text()
    reference = yaml.safe_load(re.findall(r"```yaml\n(.*?)```", text, flags=re.S)[0])
    assert not list(validator.iter_errors(reference))


MISTAKES = [
    # (what, path of the change, value, the field the validator names)
    ("unknown field", ("stitching", "epoch"), 3, "stitching.epoch"),
    ("unknown top-level field", ("stiching",), {}, "stiching"),
    ("wrong type", ("stitching", "epochs"), "three", "stitching.epochs"),
    ("out of range", ("stitching", "alphas"), [1.5], "stitching.alphas"),
    ("not a choice", ("stitching", "objectives"), ["tlmm"], "stitching.objectives[0]"),
    ("unknown donor field", ("donors", "plain_a", "epocs"), 3, "donors.plain_a.epocs"),
    ("donor out of range", ("donors", "plain_a", "lr"), -1.0, "donors.plain_a.lr"),
    ("unknown data field", ("data", "size"), 10, "data.size"),
    ("bad evaluation type", ("evaluation", "iterations"), 2.5, "evaluation.iterations"),
    ("bad pair entry", ("stitching", "pairs"), [{"ordered": {"arch": "resnet_tiny"}, "zip": {}}], "stitching.pairs[0]"),
]


def _with(space: dict, path: tuple, value) -> dict:
    space = copy.deepcopy(space)
    node = space
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return space


@pytest.mark.parametrize("what,path,value,field", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_the_schema_rejects_what_the_validator_rejects(what, path, value, field, validator):
    space = _with(TINY_SPACE, path, value)
    assert not list(validator.iter_errors(TINY_SPACE))
    assert list(validator.iter_errors(space)), f"the schema accepts {what}"
    with pytest.raises(SpecError) as info:
        parse_space(space)
    assert info.value.field == field


def test_conditional_fields_follow_their_condition(validator):
    space = copy.deepcopy(TINY_SPACE)
    test = {"test": "specificity", "donors": ["zoo:plain_a"], "layers": ["layer1.0"]}
    space["representation_tests"] = [test]
    assert not list(validator.iter_errors(space))
    space["representation_tests"] = [dict(test, ranks=[2])]  # ranks apply to sensitivity alone
    assert list(validator.iter_errors(space))
    space["representation_tests"] = [dict(test, test="sensitivity")]  # and are required there
    assert list(validator.iter_errors(space))


def test_a_registered_donor_source_appears_in_the_schema(registered):
    options = {"hub": Option("hub", "string", doc="a model hub id"), "arch": Option("arch", "string")}
    before = json.dumps(space_schema())
    registered(DONOR_SOURCES, "hub", DonorSource("hub", "hub", None, None, str, options=options))
    forms = space_schema()["properties"]["donors"]["additionalProperties"]["anyOf"]
    hub = [f for f in forms if "hub" in f.get("properties", {})]
    assert len(hub) == 1 and hub[0]["required"] == ["arch", "hub"] and "hub" not in before
    # the zoo form now refuses the new marker too
    zoo = [f for f in forms if "epochs" in f.get("properties", {})][0]
    assert {"required": ["hub"]} in zoo["not"]["anyOf"]
