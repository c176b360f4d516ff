"""The docs say what the code does: every YAML example parses, the reference search space of
docs/search-spaces.md is a valid space, and every default it states is the one the code declares (each field
of a section is declared once, as an `Option`), with no declared field left out of it."""

import re

import pytest
import yaml

from sweep.config import attacks, data, donors, evaluation, sources, space
from sweep.config.space import parse_space
from sweep.kinds.examples import spec as examples
from sweep.kinds.reptest import spec as reptests
from sweep.kinds.trial import block
from sweep.registry import KINDS
from tests.conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _yaml_blocks(path):
    return re.findall(r"```yaml\n(.*?)```", path.read_text(), flags=re.S)


def _reference() -> dict:
    return yaml.safe_load(_yaml_blocks(REPO / "docs" / "search-spaces.md")[0])


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_yaml_example_parses(path):
    for text in _yaml_blocks(path):
        assert yaml.safe_load(text) is not None


def test_the_reference_search_space_is_a_valid_space():
    """With the options that apply only together with others switched on (momentum: sgd; the indices that
    similarity_samples and layouts apply to; the kept epochs and adversarial inputs that training_similarity's
    donors and attack need), the reference is a space `plan` accepts."""
    ref = _reference()
    ref["stitching"].update(optimizer="sgd", indices=["cka", "pwcca", "opd", "dm"])
    ref["donors"]["plain_a"]["checkpoint_every"] = 2
    ref["training_similarity"][0]["inputs"] = "adversarial"
    sweep = parse_space(ref)
    assert sweep.trials and sweep.reptests and len(sweep.units["similarity"]) == 2
    assert len(sweep.units["training_similarity"]) == 1
    assert {t.objective for t in sweep.trials} == set(ref["stitching"]["objectives"])


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def _training_attack_options() -> dict:
    return {k: v for k, v in attacks.ATTACK_OPTIONS.items() if k != "source"}


def _sections(ref: dict) -> list[tuple[str, dict, dict]]:
    """(where, the documented mapping, the options that section declares)."""
    stitching = ref["stitching"]
    test = ref["representation_tests"][0]
    # every kind's section, from the registry: the reference shows each (a list's first entry; examples: each)
    kinds = [k for k in KINDS.values() if k.section]
    assert {k.section for k in kinds} <= set(ref), "a kind's section is missing from the reference"
    out = [("data", ref["data"], data.OPTIONS | data.SOURCE_OPTIONS)]
    for k in kinds:
        raw = ref[k.section]
        entries = [(k.section, raw)] if isinstance(raw, dict) else [(f"{k.section}[{i}]", e) for i, e in enumerate(raw)]
        out += [(where, entry, k.options) for where, entry in (entries if k.name == "examples" else entries[:1])]
    out += [
        ("stitching.layouts", stitching["layouts"], block.LAYOUT_OPTIONS),
        ("representation_tests[0].probe", test["probe"], reptests.PROBE_OPTIONS),
        ("similarity[0].attack", ref["similarity"][0]["attack"], attacks.ATTACK_OPTIONS),
        ("examples[2].attacks[0]", ref["examples"][2]["attacks"][0], examples.ATTACK_FIELDS),
        ("training_similarity[0].attack", ref["training_similarity"][0]["attack"], _training_attack_options()),
        ("evaluation", ref["evaluation"], evaluation.OPTIONS),
        ("resources", ref["resources"], space.RESOURCE_OPTIONS),
    ]
    out += [(f"donors.{name}", d, donors.ZOO_OPTIONS) for name, d in ref["donors"].items() if "arch" in d]
    out += [
        (f"donors.{name}.noise", d["noise"], sources.NOISE_OPTIONS) for name, d in ref["donors"].items() if "noise" in d
    ]
    return out


# Values the reference shows as examples of a choice, not as defaults (the other donors show each training
# method's own fields).
EXAMPLES = {
    "representation_tests[0].name",
    "similarity[0].name",
    "inversions[0].name",
    "inversions[0].donors",
    "tsne[0].name",
    "examples[0].name",
    "examples[0].show",
    "examples[1].show",
    "examples[2].show",
    "training_similarity[0].name",
    "donors.robust_a.training",
    "donors.trades_a.training",
}


def test_every_stated_default_is_the_declared_one():
    wrong = []
    for where, documented, options in _sections(_reference()):
        for key, value in documented.items():
            assert key in options, f"docs/search-spaces.md documents {where}.{key}, which the code does not read"
            opt = options[key]
            example = f"{where}.{key}" in EXAMPLES or opt.kind == "mapping" and value is not None
            if opt.required or opt.derived or example:
                continue
            if _plain(value) != _plain(opt.default):
                wrong.append(f"{where}.{key}: the docs say {value!r}, the code's default is {opt.default!r}")
    assert not wrong, "\n".join(wrong)


def test_every_declared_field_is_documented():
    documented: dict[int, set] = {}
    tables = {}
    for _, mapping, options in _sections(_reference()):
        documented.setdefault(id(options), set()).update(mapping)
        tables[id(options)] = options
    missing = [key for i, options in tables.items() for key in options if key not in documented[i]]
    assert not missing, f"fields the docs' reference search space leaves out: {missing}"


def test_the_extension_recipes_of_development_md_run():
    """The code of the one-file recipes registers what it says: run it in a fresh interpreter, then plan a
    space that uses the new objective (with its parameter) and the new indices (one per trial, one a
    similarity entry's measure)."""
    import json
    import subprocess
    import sys

    from tests.conftest import TINY_SPACE

    snippets = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "development.md").read_text(), flags=re.S)
    assert len(snippets) >= 2
    space = json.loads(json.dumps(TINY_SPACE))
    space["stitching"].update(objectives=["dm_shrunk"], gamma=0.5, indices=["cka_pooled"])
    check = (
        "from sweep.config.space import parse_space\n"
        f"sweep = parse_space({space!r})\n"
        "t = sweep.trials[0]\n"
        "assert t.params == (('gamma', 0.5),) and t.indices == ('cka_pooled',), t\n"
    )
    similarity = {"measure": "norm_cosine", "images": 20, "pairs": [{"a": "zoo:plain_a", "b": "zoo:plain_a"}]}
    check += (
        f"(u,) = parse_space(dict({space!r}, similarity={similarity!r})).units['similarity']\n"
        "assert u.measure == 'norm_cosine' and u.a_points, u\n"
    )
    code = "\n".join(_dedent(s) for s in snippets) + "\n" + check
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr


def _dedent(snippet: str) -> str:
    import textwrap

    return textwrap.dedent(snippet)


# A dotted name the docs show in backticks (`sweep.planning.memory.Need`, `"sweep.data.core:fashion_mnist"`,
# `analysis.tables()`): its leading identifier path; file paths (`sweep/models/base.py`) and patterns with
# `<...>` placeholders do not match.
_DOTTED = re.compile(r"`\"?((?:sweep|analysis)(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)?)(?![\w.:<])")
_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\s+(.+)|import\s+(.+))$")


def _resolves(dotted: str) -> bool:
    """Whether `module.attr...` or `module:attr...` names something: the longest prefix importable as a
    module, then each remaining part an attribute."""
    import importlib

    module, _, attrs = dotted.partition(":")
    parts = module.split(".") + (attrs.split(".") if attrs else [])
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as err:
            if err.name and ".".join(parts[:cut]).startswith(err.name):
                continue  # that prefix is no module: try a shorter one
            raise
        for part in parts[cut:]:
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    return False


def _imported_names(code: str) -> list[str]:
    """What the `import` / `from ... import` lines of a code block name, as dotted paths."""
    out = []
    for line in code.splitlines():
        m = _IMPORT.match(line.split("#")[0].rstrip())
        if m and m.group(1):
            names = m.group(2).strip("() ").split(",")
            out += [f"{m.group(1)}:{n.split(' as ')[0].strip()}" for n in names if n.strip()]
        elif m:
            out += [n.split(" as ")[0].strip() for n in m.group(3).split(",")]
    return out


def test_every_import_path_the_docs_show_resolves():
    shown = set()
    for path in DOCS:
        text = path.read_text()
        for code in re.findall(r"```python\n(.*?)```", text, flags=re.S):
            shown.update((path.name, name) for name in _imported_names(code))
        shown.update((path.name, m.group(1)) for m in _DOTTED.finditer(text))
    names = {name for _, name in shown}
    assert {"sweep.data.core:fashion_mnist", "analysis.load", "sweep.store.catalogue:IndexEntry"} <= names
    broken = sorted(f"{doc}: {name}" for doc, name in shown if not _resolves(name))
    assert not broken, "names the docs show that do not resolve:\n" + "\n".join(broken)
