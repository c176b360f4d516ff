"""Kinds of work, each one package here, laid out as a plugin kind is (docs/development.md): its `__init__.py`
registers its `Kind` entry (`base.py`) with every hook named there; `spec.py` parses its section (torch-free);
`table.py` holds its results table; `cost.py` its memory need and price; `run.py` its work (PyTorch, imported
when a unit runs). Its report sections are one module of `analysis` (`analysis.report.kinds.<kind>`), named
by string: the engine never imports `analysis`.

Importing this package registers the shipped kinds in `SHIPPED`'s order, which is the order they run and their
sections are parsed: donors first, since the others read them; inversions before similarity, which reads
inverted images."""

import importlib

SHIPPED = ("donor", "trial", "reptest", "inversion", "similarity", "training_similarity", "tsne", "examples")

for _name in SHIPPED:
    importlib.import_module(f"sweep.kinds.{_name}")
