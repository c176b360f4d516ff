"""Analysis of stitchsweep results: Parquet -> pandas -> Altair charts and an HTML report.

Imports neither torch nor ray: results can be analysed anywhere pandas runs.
"""

from __future__ import annotations

import importlib

# Loaded on first use (PEP 562): `analysis.store.schema`, which the sweep reads, needs neither pandas nor Altair.
_HOME = {"figure": "notebook", "figures": "notebook", "report_data": "notebook", "table": "notebook"}
_HOME |= {"tables": "notebook"}

__all__ = [
    "load",
    "load_trials",
    "load_donors",
    "load_curves",
    "load_reptests",
    "load_similarity",
    "read_table",
    "report_data",
    "figure",
    "figures",
    "table",
    "tables",
]


def __getattr__(name: str):
    if name in __all__:
        value = getattr(importlib.import_module(f".{_HOME.get(name, 'load')}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
