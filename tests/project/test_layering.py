"""The tree's layering: Ray stays at the edge, analysis needs neither torch nor Ray, the search-space package
imports no torch, and the import graph of every module of sweep/ and analysis/ has no cycle and points one way.

The graph: one node per module (a package is the node of its `__init__.py`); an edge for every import of a
module of the tree, at any depth (function-level imports and imports under `if TYPE_CHECKING:` count, relative
imports are resolved; `from pkg import name` is an edge to `pkg.name` when that is a module, else to `pkg`,
so a package `__init__` that re-exports is an edge from it to the module it re-exports). Importing `a.b.c`
runs `a/__init__.py` and `a/b/__init__.py` first; that implicit step is not an edge (it cannot make a loop that
Python would meet half-initialised: a package's `__init__` has finished, or is the one importing, before any
of its modules runs). The registries' lazy population names a module in a string (`Registry(kind,
populate=...)`, a kind's `run="module:function"`): that is the plugin mechanism, resolved when an entry is
first asked for, not an import edge. No cycle at module level, type-only imports included.

Layers, bottom to top: a module may import its own layer and those below it, never one above. A module's
layer is that of the longest entry of `LAYERS` it starts with.
  0  sweep (its version), sweep.registry            names of everything a space can name; nothing heavy
  1  sweep.store                                     the results' layout, schemas, storage (no torch)
  2  sweep.config                                    search spaces to frozen specs (no torch at import)
  3  sweep.data, sweep.models                        datasets, networks
     sweep.costs                                     the cost models' primitives (memory, work, prices)
  4  sweep.train, sweep.measures                     training, evaluation, what is measured
  5  sweep.worker                                    what a worker keeps: its cache, splits, activations, donors
  6  sweep.stitching                                 the stitching layer and its objectives
  7  sweep.kinds                                     kinds of work: one unit each, idempotent
  8  sweep.planning                                  what is known before a run: units, memory, cost
  9  sweep.backends                                  schedulers (Ray), the driver's progress and lease
  10 analysis (reading, stats, matrices, ...)        reading the store into pandas; computations on it
  11 analysis.charts                                 the report's charts
  12 analysis.report                                 the report, its page, a paper's report, the notebook API
  13 sweep.api, sweep.cli, sweep.__main__            the library (plan, run, resume, report) and the command line on it
The engine (every layer below `analysis`) never imports `analysis`; the command line, on top of both, is the
one place in sweep/ that does (`stitchsweep report`, `figures`).
"""

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

LAYERS = [
    {"sweep", "sweep.registry"},
    {"sweep.store"},
    {"sweep.config"},
    {"sweep.data", "sweep.models", "sweep.costs"},
    {"sweep.train", "sweep.measures"},
    {"sweep.worker"},
    {"sweep.stitching"},
    {"sweep.kinds"},
    {"sweep.planning"},
    {"sweep.backends"},
    {"analysis"},
    {"analysis.charts"},
    {"analysis.report"},
    {"sweep.cli", "sweep.__main__", "sweep.api"},
]
TOP_OF_THE_ENGINE = "sweep.backends"  # every layer up to this one is the engine: it imports no `analysis`


def _modules_after(stmt: str) -> set[str]:
    code = f"import sys; {stmt}; print(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_import_sweep_does_not_import_ray():
    mods = _modules_after("import sweep, sweep.config.space, sweep.kinds.trial.run, sweep.cli")
    assert "ray" not in mods


def test_import_config_does_not_import_torch():
    mods = _modules_after("import sweep.config.space, sweep.kinds.trial.spec, sweep.config.trial")
    assert "torch" not in mods and "ray" not in mods


def test_import_analysis_imports_neither_torch_nor_ray():
    mods = _modules_after(
        "import analysis, analysis.charts.stitching, analysis.report.write, analysis.report.paper, sweep.store.results"
    )
    assert "torch" not in mods and "ray" not in mods


def test_reading_results_and_their_report_sections_imports_neither_torch_nor_ray(tmp_path):
    """The analysis learns each kind's table (schema, key column) and report sections from the kinds'
    declarations, which the registry reads without PyTorch."""
    code = (
        f"import analysis; analysis.load({str(tmp_path)!r}); "
        "from analysis.report.sections import chart_sections as c; c()"
    )
    mods = _modules_after(code)
    assert "sweep.kinds.trial" in mods and "torch" not in mods and "ray" not in mods


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


def _files() -> dict[str, Path]:
    return {_module_name(p): p for top in ("sweep", "analysis") for p in (REPO / top).rglob("*.py")}


def _imported(node: ast.AST, package: str) -> list[str]:
    """The dotted names one import statement names (relative ones resolved against `package`), each with the
    names it imports from it appended (`from a import b` -> `a`, `a.b`)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
    return [base, *(f"{base}.{a.name}" for a in node.names)]


def _imports(path: Path, module: str, files: dict[str, Path]) -> set[str]:
    """Every module of the tree `path` imports, at any depth (function-level and TYPE_CHECKING imports count)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        names = _imported(node, package)
        if isinstance(node, ast.ImportFrom):  # `from pkg import name`: the module pkg.name, else pkg itself
            base, members = names[0], names[1:]
            found.update(m for m in members if m in files)
            if any(m not in files for m in members):
                found.add(base)
        else:
            found.update(names)
    return {m for m in found if m in files and m != module}


def _graph() -> dict[str, set[str]]:
    files = _files()
    return {mod: _imports(path, mod, files) for mod, path in files.items()}


def test_the_graph_sees_relative_type_only_and_function_level_imports():
    """The parser the tests below rely on: on the tree's own modules, edges that only those forms give."""
    graph = _graph()
    assert "analysis.report.data" in graph["analysis.report.sections"]  # under TYPE_CHECKING
    assert "sweep.planning.memory" in graph["sweep.api.inputs"]  # inside a function
    assert "sweep.store.exports" in graph["analysis"]  # a package's __init__
    assert "sweep.worker.zoo" in graph["sweep.kinds.trial.run"]  # `from module import name`


def test_no_relative_imports_in_the_engine():
    """Absolute imports only in sweep/ (analysis resolves its relative ones in the graph below)."""
    for path in (REPO / "sweep").rglob("*.py"):
        rel = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ImportFrom) and n.level]
        assert not rel, f"{path.relative_to(REPO)}: relative import at line {rel[0].lineno}"


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph` (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_cycle_finder_finds_a_cycle_through_three_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycle(graph) == ["a", "b", "c", "a"] and _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles_in_sweep_and_analysis():
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def _layer(module: str) -> int:
    """The layer of the longest `LAYERS` entry that `module` is or starts with."""
    best, layer = "", None
    for i, entries in enumerate(LAYERS):
        for entry in entries:
            if (module == entry or module.startswith(entry + ".")) and len(entry) >= len(best):
                best, layer = entry, i
    assert layer is not None, f"{module} is in no layer: add it to LAYERS"
    return layer


def test_every_import_points_to_its_own_layer_or_one_below():
    bad = [f"{mod} imports {dep}" for mod, deps in _graph().items() for dep in deps if _layer(dep) > _layer(mod)]
    assert not bad, "\n".join(sorted(bad))


def test_the_engine_never_imports_analysis():
    """The store is the engine's; `analysis` reads it. Only the command line, above both, imports analysis."""
    top = _layer(TOP_OF_THE_ENGINE)
    engine = {m: deps for m, deps in _graph().items() if m.startswith("sweep") and _layer(m) <= top}
    assert len(engine) > 100  # the whole engine, not an empty selection
    bad = [f"{m} imports {d}" for m, deps in engine.items() for d in deps if d.split(".")[0] == "analysis"]
    assert not bad, "\n".join(sorted(bad))
    assert all(_layer(m) > top for m in _graph() if m.startswith("analysis"))


def test_at_most_five_loose_modules_at_the_top_of_sweep():
    loose = [p.name for p in (REPO / "sweep").glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(loose) <= 5, loose


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
    assert len(readme.splitlines()) <= 230  # with the study of "Your own study", a plugin's versions, plan --address
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
