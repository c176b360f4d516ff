"""What the commands read from the command line: a search space, a storage root, a results directory, as the
library reads them (`sweep.api.inputs`), each bad one a SpecError naming the argument."""

from __future__ import annotations

from sweep.api.inputs import open_results as _open_results
from sweep.api.inputs import open_storage, read_space


def load_space(path: str, overrides: list[str] | tuple[str, ...] = (), plugins: list[str] | tuple = ()):
    """The search space at `path` (a file, else a shipped space's name) with the command line's `overrides` and
    `--plugin` modules: what `plan` and `run` read (`sweep.api.inputs.read_space`)."""
    return read_space(path, overrides, plugins)


def storage(field: str, where: str):
    """Open a local folder or pyarrow.fs URI, turning a bad one into a SpecError naming `field`."""
    return open_storage(where, field)


def open_results(path: str):
    """(the sweep, its `SweepDir`) of a RESULTS argument: `<root>/<sweep>` holding the space `run` kept."""
    return _open_results(path, "RESULTS")
