"""What a unit records of the exception that failed it: its type and message, and where the traceback last passed
through a plugin's code, so that a user reads their own file and line without the worker's log."""

from __future__ import annotations

from pathlib import Path

from sweep.registry import PLUGIN_VERSIONS

PACKAGES: set[str] = set()  # the package folders imported as plugins here: their frames are named by folder


def plugin_frame(tb) -> tuple[str, int, str] | None:
    """(file name, line, function) of the innermost frame of traceback `tb` that runs a plugin module's code
    (a module `load_plugin` imported, here or on a worker): where the user's own code was when it failed. A
    package plugin's file is named with its folder (`echo/run.py`)."""
    found = None
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__", "")
        top = module.split(".")[0]
        if module in PLUGIN_VERSIONS or top in PLUGIN_VERSIONS:
            code = tb.tb_frame.f_code
            name = Path(code.co_filename).name
            if top in PACKAGES:  # the module's folders: `echo/run.py`, `echo/__init__.py`
                parts = module.split(".")
                name = "/".join([*(parts if name == "__init__.py" else parts[:-1]), name])
            found = (name, tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    return found


def describe_failure(exc: BaseException) -> str:
    """What a unit records of the exception that failed it: its type and message, and where the traceback last
    passed through a plugin's code (`my_models.py:42 in forward`, `echo/run.py:12 in run_echo`), so that a user
    reads their own file and line without the worker's log."""
    text = f"{type(exc).__name__}: {exc}"
    at = plugin_frame(exc.__traceback__)
    return f"{text} (at {at[0]}:{at[1]} in {at[2]})" if at else text
