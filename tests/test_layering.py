"""The engine's layering: Ray stays at the edge, analysis needs neither torch nor Ray, the search-space
package imports no torch, no module imports another in a cycle, and each package imports only the layers
below it.

Layers, bottom to top (a package may import its own layer and those below):
  sweep.registry, sweep.config                     search spaces to frozen specs (no torch at import)
  sweep.data, sweep.models, sweep.stitching,
  sweep.measures, sweep.train, sweep.store.results       the PyTorch building blocks
  sweep.kinds                                      kinds of work: one unit each, idempotent
  sweep.backends, sweep.cli, sweep.plan.planning,
  sweep.plan.status                                     scheduling and the command line
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

LAYERS = [
    {"sweep", "sweep.registry", "sweep.config", "sweep.plan.memory", "sweep.plan.index_costs", "sweep.plan.disk"},
    {
        "sweep.data",
        "sweep.models",
        "sweep.stitching",
        "sweep.measures",
        "sweep.train",
        "sweep.store.results",
        "sweep.backends.progress",
        "sweep.backends.lease",
        "sweep.worker.cache",
        "sweep.worker.activations",
    },
    {"sweep.kinds"},
    {
        "sweep.backends",
        "sweep.cli",
        "sweep.cli.papers",
        "sweep.plan.planning",
        "sweep.plan.status",
        "sweep.plan.estimate",
        "sweep.plan.prices",
        "sweep.plan.calibration",
        "sweep.__main__",
    },
]


def _modules_after(stmt: str) -> set[str]:
    code = f"import sys; {stmt}; print(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_import_sweep_does_not_import_ray():
    mods = _modules_after("import sweep, sweep.config.space, sweep.kinds.stitch, sweep.cli")
    assert "ray" not in mods


def test_import_config_does_not_import_torch():
    mods = _modules_after("import sweep.config.space, sweep.config.stitching, sweep.config.trial")
    assert "torch" not in mods and "ray" not in mods


def test_import_analysis_imports_neither_torch_nor_ray():
    mods = _modules_after("import analysis, analysis.charts.stitching, analysis.report.write")
    assert "torch" not in mods and "ray" not in mods


def test_the_store_layout_and_the_kinds_declarations_load_no_torch_pandas_or_altair():
    """What checking a space reads of results and of the kinds of work (their sections, units and parts) is
    declared apart from their work: pandas, Altair and PyTorch load only when something is read or run."""
    mods = _modules_after(
        "import analysis, sweep.store.schema, sweep.backends.lease; from sweep.registry import KINDS; list(KINDS)"
    )
    assert not {"torch", "pandas", "altair"} & mods, {"torch", "pandas", "altair"} & mods


def test_no_analysis_submodule_is_named_like_a_function_it_exports():
    """`analysis` exports its functions lazily: a submodule of the same name, once imported, would replace
    the function (`analysis.load` was both)."""
    import analysis

    clash = [
        n for n in analysis.__all__ if (REPO / "analysis" / f"{n}.py").exists() or (REPO / "analysis" / n).is_dir()
    ]
    assert not clash


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every sweep module `path` imports, at any depth (function-level imports count; imports under
    `if TYPE_CHECKING:` do not)."""
    tree = ast.parse(path.read_text())
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("sweep"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("sweep"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in (REPO / "sweep").rglob("*.py")}
    return {mod: {m for m in _imports(path) if m in files and m != mod} for mod, path in files.items()}


def test_no_relative_imports_in_the_engine():
    """Absolute imports only, so the graph below sees every edge."""
    for path in (REPO / "sweep").rglob("*.py"):
        rel = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ImportFrom) and n.level]
        assert not rel, f"{path.relative_to(REPO)}: relative import at line {rel[0].lineno}"


def test_no_import_cycles():
    graph = _graph()
    state: dict[str, int] = {}

    def visit(node, stack):
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt) :] + [nxt] if nxt in stack else [node, nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


def _layer(module: str) -> int:
    for i, layer in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in layer if p != "sweep") or module == "sweep":
            return i
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def test_each_package_imports_only_its_layer_and_those_below():
    bad = [f"{mod} imports {dep}" for mod, deps in _graph().items() for dep in deps if _layer(dep) > _layer(mod)]
    assert not bad, "\n".join(sorted(bad))


def test_only_the_ray_backends_import_ray():
    for path in (REPO / "sweep").rglob("*.py"):
        tree = ast.parse(path.read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0]
        if any(name == "ray" or name.startswith("ray.") for name in names):
            assert _module_name(path).startswith("sweep.backends."), f"{path.relative_to(REPO)} imports ray"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    import re

    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_readme_is_a_front_page_whose_links_exist():
    """The README stays a front page (the manual lives in docs/), and every file (and heading) it or the docs
    link exists inside the repository (nothing points outside it)."""
    import re

    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for page in [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "cluster").glob("*.md")]:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", page.read_text()):
            if "://" in target:
                continue
            path = (page.parent / target).resolve() if target else page.resolve()
            assert path.is_relative_to(REPO.resolve()), f"{page.relative_to(REPO)} links outside the repo: {target}"
            assert path.exists(), f"{page.relative_to(REPO)} links to missing {target}"
            if anchor and path.suffix == ".md":
                headings = {_anchor(h) for h in re.findall(r"^#+ (.*)$", path.read_text(), flags=re.M)}
                assert anchor in headings, f"{page.relative_to(REPO)} links to a missing heading {target}#{anchor}"


MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def test_modules_and_functions_stay_small():
    """One module, one job: no module in sweep/ or analysis/ over 400 lines, no function over 60."""
    big = []
    for path in [*(REPO / "sweep").rglob("*.py"), *(REPO / "analysis").rglob("*.py")]:
        source = path.read_text()
        lines = len(source.splitlines())
        if lines > MAX_MODULE_LINES:
            big.append(f"{path.relative_to(REPO)}: {lines} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    big.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}: {length} lines")
    assert not big, "\n".join(big)
