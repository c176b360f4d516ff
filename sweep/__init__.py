"""stitchsweep's engine: search spaces, donors, stitching trials and their Parquet results.

The library (docs/python-api.md): `sweep.plan`, `sweep.run`, `sweep.resume`, `sweep.status`, `sweep.report`
(`sweep.api`), and what a plugin registers with: `register_architecture` (`StagedNet`, `Normalize`),
`register_dataset`, `register_index` (`IndexEntry`, `Pair`), `register_objective`, `register_kind` (`Kind`,
`RunContext`, `record_unit`, `record_once`, `unit_schema`) and `Option`. Each name loads its module on first
use (PEP 562): importing `sweep` imports neither Ray nor torch; `sweep.backends` (`ray.py`, `checks.py`) alone
imports Ray, and the deep paths (`sweep.models.base.register_architecture`, ...) keep working.

`sweep.__version__` is the installed distribution's version (`importlib.metadata`), which pyproject.toml
states, the one place it is written; a checkout that is not installed reads it from its pyproject.toml. It is
looked up on first use: `stitchsweep --version`, and every results row's `stitchsweep_version`.
"""

from __future__ import annotations

import re
from pathlib import Path

DISTRIBUTION = "stitchsweep"

# name -> its module: the library, and the extension API a plugin registers with
EXPORTS = {
    **dict.fromkeys(("plan", "run", "resume", "status", "report", "Plan", "Results", "RunOptions"), "sweep.api"),
    **dict.fromkeys(("register_architecture", "StagedNet", "Normalize"), "sweep.models.base"),
    "register_dataset": "sweep.data.declared",
    **dict.fromkeys(("register_index", "Pair"), "sweep.measures.indices"),
    "IndexEntry": "sweep.store.catalogue",
    "register_objective": "sweep.stitching.declared",
    **dict.fromkeys(("register_kind", "Kind", "RunContext", "record_unit", "record_once"), "sweep.kinds.base"),
    "unit_schema": "sweep.store.units",
    "Option": "sweep.config.fields",
}
__all__ = sorted(EXPORTS)
UNKNOWN = "0+unknown"  # neither installed nor a checkout: a version no release has


def _version() -> str:
    """The installed distribution's version; else the version pyproject.toml beside the package states."""
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        pass
    try:
        text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    except OSError:
        return UNKNOWN
    project = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, flags=re.M | re.S)
    found = project and re.search(r'^version\s*=\s*"([^"]+)"', project.group(1), flags=re.M)
    return found.group(1) if found else UNKNOWN


def __getattr__(name: str):
    if name == "__version__":
        version = _version()
        globals()["__version__"] = version  # looked up once
        return version
    if name in EXPORTS:
        from importlib import import_module

        value = getattr(import_module(EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *EXPORTS, "__version__"})
