"""Each shipped similarity index lives in one module of `sweep/measures/indices/`: its catalogue entry, its
memory and work models, its math and its registration, and nothing outside keeps a table of indices by name
(planning reads the registered index: `Index.numbers`, `Index.count`, `Index.memory`, `Index.work`)."""

import ast
import importlib
import inspect
import subprocess
import sys

from sweep.measures import indices
from sweep.registry import INDICES
from sweep.store.catalogue import INDEX_CATALOGUE, IndexEntry
from tests.conftest import REPO

# each shipped index -> its module of sweep/measures/indices/
HOMES = {
    "cka": "cka",
    "pwcca": "pwcca",
    "opd": "opd",
    "dm": "dm",
    "rank": "rank",
    "receiver_rank": "rank",
    "svcca": "svcca",
    "saliency": "saliency",
    "rsa": "rsa",
    "mknn": "mknn",
    "linreg": "linreg",
    "cka_debiased": "cka_debiased",
}


def test_each_shipped_index_is_registered_by_its_own_module_with_its_entry_models_and_math():
    assert [m.__name__ for m in indices.SHIPPED] == [
        f"sweep.measures.indices.{m}" for m in dict.fromkeys(HOMES.values())
    ]
    for name, home in HOMES.items():
        module = importlib.import_module(f"sweep.measures.indices.{home}")
        index = INDICES[name]
        owned = vars(module).values()
        assert any(v is index for v in owned), f"{name}: not registered in {module.__name__}"
        assert any(v is index.entry for v in owned if isinstance(v, IndexEntry)), f"{name}: entry elsewhere"
        assert index.entry is INDEX_CATALOGUE[name]
        assert index.fn.__module__ == module.__name__, f"{name}: its math is in {index.fn.__module__}"
        for hook in ("numbers", "count"):  # models on matrices: the module's own functions
            fn = getattr(index, hook)
            assert fn is None or fn.__module__ == module.__name__, (name, hook, fn)
        for hook, base, built_from in (
            ("memory", "sweep.costs.memory", "numbers"),
            ("work", "sweep.costs.work", "count"),
        ):
            fn = getattr(index, hook)  # the module's own, or built by sweep.costs from the module's numbers / count
            assert (
                fn is None
                or fn.__module__ == module.__name__
                or (fn.__module__ == base and getattr(index, built_from) is not None)
            ), (name, hook, fn)
        source = inspect.getsource(module)
        assert "register_index(" in source and "IndexEntry(" in source
    sized = {n for n, i in INDICES.items() if i.memory is not None}
    priced = {n for n, i in INDICES.items() if i.work is not None}
    beyond = {"rsa", "mknn", "linreg", "cka_debiased"}  # sized and priced by their own models
    assert sized == {"cka", "pwcca", "opd", "dm", "rank", "svcca"} | beyond
    assert priced == {"cka", "pwcca", "opd", "dm", "rank"} | beyond


def test_no_table_of_indices_by_name_remains_in_planning_the_costs_or_the_catalogue():
    """`NUMBERS` and `WORK` (name -> model) are gone, the catalogue writes no shipped entry, and no dict literal
    in planning, the costs or the catalogue is keyed by two or more index names (the store's column
    descriptions are keyed by column, some of which share an index's name)."""
    import sweep.costs.work
    import sweep.planning.memory

    assert not hasattr(sweep.planning.memory, "NUMBERS") and not hasattr(sweep.costs.work, "WORK")
    assert not (REPO / "sweep/planning/index_costs.py").exists()
    assert "IndexEntry(" not in (REPO / "sweep/store/catalogue.py").read_text()
    names = set(HOMES)
    keyed = []
    for folder in ("sweep/planning", "sweep/costs", "sweep/store/catalogue.py"):
        for path in [REPO / folder] if folder.endswith(".py") else (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Dict):
                    keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                    if len(keys & names) >= 2:
                        keyed.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not keyed, keyed


def test_reading_the_catalogue_fills_it_from_the_index_modules_without_torch():
    code = (
        "import sys; from sweep.store.catalogue import INDEX_CATALOGUE; names = list(INDEX_CATALOGUE); "
        "print(' '.join(names), 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.split() == [*HOMES, "False"]
