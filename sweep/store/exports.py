"""Names of a package that load their module on first use (PEP 562): how `analysis`, `sweep.data` and
`sweep.models` export their functions without importing pandas, Altair or PyTorch when only a lighter
submodule (a registry's declarations, the Parquet schemas) is wanted."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(package: str, homes: dict[str, str], namespace: dict) -> tuple[Callable, Callable]:
    """(`__getattr__`, `__dir__`) for `package`: each name of `homes` is read from its submodule
    (`homes[name]`, relative to the package) the first time it is asked for, then kept in `namespace`."""

    def __getattr__(name: str):
        if name in homes:
            value = getattr(importlib.import_module(f".{homes[name]}", package), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__
