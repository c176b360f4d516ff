"""Kinds of work, each one registered `Kind` entry (`base.py`): donors (`donor.py`: train or load, evaluate),
stitching trials (`stitch.py`), representation-test units (`reptest.py`), representation inversion
(`inversion.py`), similarity units without stitching (`similarity.py`), CKA across training epochs
(`training_similarity.py`), t-SNE maps (`embedding.py`), examples (`examples.py`). Importing the package
registers them (`declared.py`, which imports no PyTorch: each kind's work module loads when a unit runs), in the
order they run and their sections are parsed: donors first, since the others read them.

A kind may instead be one module of its own here that calls `register_kind(...)` at its top level (its
declaration torch-free, its work importing PyTorch inside its functions): such modules are found by that call
(read, not imported, so that the work modules of the kinds above stay unloaded) and imported after
`declared.py`, by name."""

import ast
import importlib
from pathlib import Path

from sweep.kinds import declared  # noqa: F401  (registers the shipped kinds)


def _declares_a_kind(path: Path) -> bool:
    """Whether the module at `path` calls `register_kind` at its top level."""
    for node in ast.parse(path.read_text()).body:
        call = node.value if isinstance(node, ast.Expr) else None
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "register_kind":
            return True
    return False


for _path in sorted(Path(__file__).parent.glob("*.py")):
    if _path.stem not in ("__init__", "declared", "base") and _declares_a_kind(_path):
        importlib.import_module(f"sweep.kinds.{_path.stem}")
