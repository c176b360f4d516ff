"""What the commands read from the command line: a search space, a storage root, a results directory. Each bad
one is a SpecError naming the argument, what was expected and what was found."""

from __future__ import annotations

from pathlib import Path

from sweep.config.errors import SpecError


def load_space(path: str, overrides: list[str] | tuple[str, ...] = (), plugins: list[str] | tuple = ()):
    """The search space at `path` with the command line's `overrides` applied and its `--plugin` modules,
    refused (a SpecError) when a unit's indices would not fit `resources.memory_per_trial`: what `plan` and
    `run` read."""
    from sweep.config.space import load_space as read_space
    from sweep.plan import memory

    sweep = read_space(path, overrides, plugins)
    memory.check(sweep)  # with resources.memory_per_trial: every unit's indices fit it
    return sweep


def storage(field: str, where: str):
    """Open a local folder or pyarrow.fs URI, turning a bad one into a SpecError naming `field`."""
    from sweep.store.storage import StorageError, open_root

    try:
        return open_root(where)
    except StorageError as exc:
        raise SpecError(
            field, "a local folder or a pyarrow.fs URI (s3://bucket/prefix, gs://bucket/prefix, ...)", where, str(exc)
        ) from None


def check_results(p, path: str, marker: str | tuple[str, ...], expected: str) -> None:
    """Refuse a RESULTS argument without `marker` (or any of several) inside, suggesting the sweep folders
    below it."""
    from sweep.store.layout import SPACE_FILE

    try:
        ok = any((p / m).exists() for m in ((marker,) if isinstance(marker, str) else marker))
        inside = [] if ok else [q for q in p.glob("*") if (q / SPACE_FILE).is_file()]
    except OSError as exc:
        raise SpecError("RESULTS", expected, path, f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    if not ok:
        hint = f"did you mean {', '.join(str(q) for q in inside)}?" if inside else ""
        raise SpecError("RESULTS", expected, path, hint)


def open_results(path: str):
    """A results directory is `<root>/<sweep>` holding the `space.yaml` that `run` copied there."""
    from sweep.config.space import load_space as read_space
    from sweep.store.layout import SPACE_FILE
    from sweep.store.results import SweepDir

    p = storage("RESULTS", path)
    check_results(p, path, SPACE_FILE, f"a results directory holding {SPACE_FILE} (made by `stitchsweep run`)")
    space = p / SPACE_FILE
    sweep = read_space(Path(space.path) if p.is_local else space)  # its plugins: the copies beside it
    return sweep, SweepDir(p.parent, p.name, uri=path)
