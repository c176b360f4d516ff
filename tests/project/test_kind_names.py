"""Each shipped kind of work is written about in its own package and its report module, not across the tree:
changing one kind means visiting its package (`sweep/kinds/<kind>/`) and `analysis/report/kinds/<kind>.py`.

Counted, for each shipped kind, in the Python files of `sweep/` and `analysis/` outside those two places and
the packages of the kinds that read its units (its `after` readers: the similarity units read inverted
images, so the similarity kind's package names the inversion kind):
- the files that name the kind *as a kind*: its name as a string literal indexing the kinds' registry or a
  sweep's units (`KINDS["tsne"]`, `units.get("tsne")`, `todo.get(...)`), compared with a kind's name
  (`kind.name == "tsne"`), or in the list of kinds `sweep/kinds/__init__.py` imports;
- for the kinds whose name is no column, index scope or common word of the domain (`inversion`,
  `training_similarity`, `tsne`, `examples`), also every other use of the name as a string literal or as a
  word of an identifier (`TSNE_DIR`, `tsne_seconds`).
"Donor", "trial", "reptest" and "similarity" are also a column or the scopes of an index (where it may be
measured: `scopes=("trial", "reptest")`) and words of the domain everywhere (`donor_key`,
`similarity_samples`): for them only the first count applies.
Each count is at most 3 files (the kinds' list among them)."""

import ast
import re
from pathlib import Path

from tests.conftest import REPO

SHIPPED = ("donor", "trial", "reptest", "inversion", "similarity", "training_similarity", "tsne", "examples")
DISTINCT = ("inversion", "training_similarity", "tsne", "examples")
LIMIT = 3


def _outside(kind: str) -> list[Path]:
    from sweep.registry import KINDS

    readers = [k.name for k in KINDS.values() if kind in k.after]
    own = [REPO / "sweep" / "kinds" / k for k in (kind, *readers)]
    report = REPO / "analysis" / "report" / "kinds" / f"{kind}.py"
    files = [*(REPO / "sweep").rglob("*.py"), *(REPO / "analysis").rglob("*.py")]
    return [p for p in files if not any(p.is_relative_to(o) for o in own) and p != report]


def _is(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Constant) and node.value == name


def _as_a_kind(tree: ast.AST, source: str, name: str) -> bool:
    """Whether `name` is used as a kind's name: indexing the registry or units, `.get(name)`, compared with a
    kind's `.name`, or an element of the shipped kinds' list."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is(node.slice, name):
            if re.search(r"KINDS|units|todo|plan", ast.get_source_segment(source, node.value) or ""):
                return True
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "get" and node.args:
            if _is(node.args[0], name) and re.search(r"KINDS|units|todo", ast.get_source_segment(source, node.func)):
                return True
        if isinstance(node, ast.Compare) and any(_is(c, name) for c in [node.left, *node.comparators]):
            sides = [ast.get_source_segment(source, c) or "" for c in [node.left, *node.comparators]]
            if any(re.search(r"(^|\.)name$|^kinds?$", s) for s in sides):  # a kind's name (not an index's `.kind`)
                return True
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "SHIPPED" for t in node.targets):
            if any(_is(e, name) for e in getattr(node.value, "elts", ())):
                return True
    return False


def _mentions(tree: ast.AST, name: str) -> bool:
    """Whether `name` is a string literal or a word of an identifier (split at underscores)."""
    words = re.compile(rf"(^|_){name}(_|$)", re.IGNORECASE)
    for node in ast.walk(tree):
        if _is(node, name):
            return True
        ident = getattr(node, "id", None) or getattr(node, "attr", None) or getattr(node, "arg", None)
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            ident = node.name
        if isinstance(ident, str) and words.search(ident):
            return True
    return False


def _spread(kind: str) -> list[str]:
    found = []
    for path in _outside(kind):
        source = path.read_text()
        tree = ast.parse(source)
        if _as_a_kind(tree, source, kind) or (kind in DISTINCT and _mentions(tree, kind)):
            found.append(str(path.relative_to(REPO)))
    return sorted(found)


def test_the_counts_see_what_they_count():
    """The two counts on code written for the purpose: each form is found, and a docstring is not code."""
    code = 'KINDS["tsne"]\nx = units.get("tsne")\nif kind.name == "tsne": pass\nTSNE_DIR = 1\n"""tsne"""\n'
    lines = code.splitlines()
    for line in lines[:3]:
        assert _as_a_kind(ast.parse(line), line, "tsne"), line
    assert not _as_a_kind(ast.parse(lines[3]), lines[3], "tsne") and _mentions(ast.parse(lines[3]), "tsne")
    for other in ('row["tsne_x"]', 'section.get("tsne")', 'index.kind == "tsne"'):
        assert not _as_a_kind(ast.parse(other), other, "tsne"), other


def test_the_shipped_kinds_are_the_registered_ones():
    from sweep import kinds
    from sweep.registry import KINDS

    assert kinds.SHIPPED == SHIPPED and all(k in KINDS for k in SHIPPED)


def test_each_shipped_kind_is_written_about_in_its_own_package():
    spread = {kind: _spread(kind) for kind in SHIPPED}
    wide = {kind: files for kind, files in spread.items() if len(files) > LIMIT}
    assert "sweep/kinds/__init__.py" in spread["tsne"]  # the kinds' list, counted
    assert not wide, wide
