"""What the library and the command line read from their caller: a search space (a file, a shipped space's name,
a YAML text or a mapping), a storage root, a results directory. Each bad one is a SpecError naming the argument,
what was expected and what was found."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sweep.config.errors import SpecError


def read_space(space: Any, overrides=(), plugins=()):
    """The validated, expanded space `space` names: a file, a shipped space's name (`sweep.config.shipped`), a YAML
    text or a mapping; with `overrides` (`key.path=value`, as on the command line) and `plugins` (files and folders
    relative to the working directory, or module names) applied; refused (a SpecError) when a unit's indices would
    not fit `resources.memory_per_trial`."""
    from sweep.config.space import load_space
    from sweep.planning import memory

    if isinstance(space, dict) or (isinstance(space, str) and "\n" in space):
        sweep = _parsed(space, list(overrides), list(plugins))
    elif isinstance(space, (str, os.PathLike)):
        from sweep.config.shipped import resolve

        sweep = load_space(resolve(str(space)), list(overrides), list(plugins))
    else:
        raise SpecError("space", "a path, a shipped space's name, a YAML text or a mapping", type(space).__name__)
    memory.check(sweep)  # with resources.memory_per_trial: every unit's indices fit it
    return sweep


def _parsed(space, overrides: list, plugins: list):
    import yaml

    from sweep.config.overrides import apply_overrides, overrides_named
    from sweep.config.space import parse_space, with_plugins

    raw = yaml.safe_load(space) if isinstance(space, str) else space
    if not isinstance(raw, dict):
        raise SpecError("space", "a mapping of search-space fields (name, data, donors, ...)", raw)
    raw, applied = apply_overrides(raw, overrides)
    try:
        return parse_space(with_plugins(raw, plugins), Path.cwd())
    except SpecError as err:
        raise overrides_named(err, applied) from None


def open_storage(where, field_name: str = "storage"):
    """A local folder or a pyarrow.fs URI (`s3://bucket/prefix`), a bad one a SpecError naming `field_name`."""
    from sweep.store.storage import StorageError, open_root

    try:
        return open_root(str(where))
    except StorageError as exc:
        expected = "a local folder or a pyarrow.fs URI (s3://bucket/prefix, gs://bucket/prefix, ...)"
        raise SpecError(field_name, expected, str(where), str(exc)) from None


def open_results(results, field_name: str = "results"):
    """(the sweep, its `SweepDir`) of a results directory `RESULTS/<sweep>` holding the space `run` kept."""
    from sweep.config.space import load_space
    from sweep.store.layout import SPACE_FILE
    from sweep.store.results import SweepDir

    p = open_storage(results, field_name)
    expected = f"a results directory holding {SPACE_FILE} (made by `stitchsweep run`)"
    check_results(p, str(results), SPACE_FILE, expected, field_name)
    space = p / SPACE_FILE
    sweep = load_space(Path(space.path) if p.is_local else space)  # its plugins: the copies beside it
    return sweep, SweepDir(p.parent, p.name, uri=str(results))


def check_results(p, path: str, marker: str | tuple[str, ...], expected: str, field_name: str = "RESULTS") -> None:
    """Refuse a results argument without `marker` (or any of several) inside, suggesting the sweep folders
    below it."""
    from sweep.store.layout import SPACE_FILE

    try:
        ok = any((p / m).exists() for m in ((marker,) if isinstance(marker, str) else marker))
        inside = [] if ok else [q for q in p.glob("*") if (q / SPACE_FILE).is_file()]
    except OSError as exc:
        raise SpecError(field_name, expected, path, f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    if not ok:
        hint = f"did you mean {', '.join(str(q) for q in inside)}?" if inside else ""
        raise SpecError(field_name, expected, path, hint)
