"""Two faults of a long sweep, seen from the driver, without Ray (docs/operations.md, "Failures and resuming").

A worker killed for memory: Ray's memory monitor kills the worker of a unit whose node runs out of memory (the
driver hears `ray.exceptions.OutOfMemoryError`, `sweep.backends.events`). The unit would be killed again if
retried, and its worker, dead, recorded nothing: the driver records it failed (`record_failed`, the row
`sweep.kinds.base.run_recorded` writes for a unit whose code raised) with what happened and what to change
(`memory_error`), and the stage goes on.

SIGTERM (SLURM's and Kubernetes' first signal, preemption, `scancel`): `stop_on_sigterm` makes it stop a
`run`/`resume` the way Ctrl+C does (Tune stops the running units, whose parts are never half-written, and
the command ends with the resume line), exiting with `EXIT_TERMINATED`; should that take longer than
`STITCHSWEEP_TERM_GRACE_S` seconds (default 20: SLURM's default grace is 30 s, and the Ray processes of a
cancelled job die beside the driver), the resume line is printed and the process exits at once: every
finished unit's part is written already, and what ran stays pending.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
from collections.abc import Callable

from sweep.kinds.base import record_failed

EXIT_TERMINATED = 143  # 128 + SIGTERM, as a shell reports a process the signal ended
GRACE_ENV = "STITCHSWEEP_TERM_GRACE_S"
GRACE_S = 20.0

# Ray 2.60's memory monitor: "... Memory on the node (IP: ..., ID: ...) was 5.94GB used / 23.54GB limit
# (0.25) ... Selected to kill: (Actor(<id>): job ID=..., task name=..., pid=1507, actual memory used=3.19GB,
# worker ID=...)" (tests/sweep/backends/test_faults.py keeps a whole message)
_KILLED = re.compile(r"(?:Actor\((?P<actor>[0-9a-f]+)\)[^()]*?)?pid=(?P<pid>\d+), actual memory used=(?P<gb>[\d.]+)GB")
_NODE = re.compile(r"was (?P<used>[\d.]+)GB used / (?P<limit>[\d.]+)GB limit")


def memory_error(message: str, actor: str | None, kind, unit, sweep) -> str:
    """The one-line `error` of a unit whose worker Ray's memory monitor killed: what it held (the monitor's
    figure for the worker of `actor`, Ray's actor id, else the first worker it names), the node's memory, and
    the fields that lower its need."""
    found = list(_KILLED.finditer(message))
    mine = next((m for m in found if actor and m["actor"] == actor), found[0] if found else None)
    held = f" (pid {mine['pid']}), which held {mine['gb']} GB" if mine else ""
    node = _NODE.search(message)
    where = f", with its node at {node['used']} of {node['limit']} GB" if node else ""
    return f"killed for memory: Ray's memory monitor stopped its worker{held}{where}; " + memory_advice(
        kind, unit, sweep
    )


def memory_advice(kind, unit, sweep) -> str:
    """What lowers a unit's memory: fewer units per node, and its kind's sized field (`Kind.memory`) or batch."""
    from sweep.registry import resolve

    ways = ["raise resources.memory_per_trial (fewer units share a node)"]
    prefix = f"{kind.section}." if kind.section else ""
    try:
        need = resolve(kind.memory)(unit, sweep) if kind.memory is not None and sweep is not None else None
    except Exception:  # advice only: a need that cannot be sized here names no field
        need = None
    if need is not None:
        ways.append(f"lower {prefix}{need.field} ({need.n:,} now)")
    if kind.options and "batch_size" in kind.options:
        ways.append(f"lower {prefix}batch_size")
    return ", or ".join(ways) + ", then resume with --failed"


def recorder(kind, units: dict, sweep, sweep_dir) -> Callable[[str, str, str | None], tuple[str, int]]:
    """`record(unit id, Ray's message, actor id) -> (error, parts written)` for a stage's `StageEvents`."""

    def record(uid: str, message: str, actor: str | None) -> tuple[str, int]:
        error = memory_error(message, actor, kind, units[uid], sweep)
        return error, record_failed(kind, units[uid], sweep_dir, error)

    return record


_TERMINATED = threading.Event()
_SAID = threading.Event()  # the command has printed its resume line
_RESUME: list[Callable[[], str]] = []  # what `stop_on_sigterm` was given
_BEFORE: list = []  # the SIGTERM handler it replaced
_LAST_WORDS: list[Callable[[], None]] = []  # run before a forced exit (the lease's release)


def terminated() -> bool:
    """Whether this process was sent SIGTERM."""
    return _TERMINATED.is_set()


def said() -> None:
    """The command has printed its resume line: the grace's end, should it come, exits without repeating it."""
    _SAID.set()


def at_forced_exit(fn: Callable[[], None]) -> None:
    """Run `fn` before the process exits at the grace's end (release what others wait for)."""
    _LAST_WORDS.append(fn)


def stop_on_sigterm(resume_line: Callable[[], str] | None = None) -> None:
    """From now on SIGTERM stops this process as Ctrl+C does (the SIGINT handler of the moment: Tune's while an
    experiment runs, else Python's KeyboardInterrupt), and ends it within the grace, printing `resume_line()`
    if the command has not. Without `resume_line`: put the handler back where a command asked for it (after
    `ray.init`, which installs its own: an immediate exit)."""
    main = threading.current_thread() is threading.main_thread()
    if resume_line is not None:
        _RESUME[:] = [resume_line]
        _BEFORE[:] = [signal.getsignal(signal.SIGTERM)] if main else []
    if _RESUME and main:
        signal.signal(signal.SIGTERM, _on_term)


def unhook() -> None:
    """The command has ended: SIGTERM does what it did before `stop_on_sigterm` (a test calling `main` in its
    own process keeps its handler)."""
    _RESUME.clear()
    if _BEFORE and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _BEFORE.pop())


def _on_term(signum, frame) -> None:
    if not _TERMINATED.is_set():
        _TERMINATED.set()
        threading.Thread(target=_deadline, name="sigterm-grace", daemon=True).start()
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):  # Tune's: stop the running trials, once (it then puts the previous one back)
        handler(signal.SIGINT, frame)
    else:
        raise KeyboardInterrupt


def grace_s() -> float:
    try:
        return max(0.0, float(os.environ.get(GRACE_ENV, GRACE_S)))
    except ValueError:
        return GRACE_S


def _deadline() -> None:
    """The grace's end: the stop has taken too long (Ray's processes dying beside the driver can hold it up);
    say so and exit now. Nothing is lost: finished units' parts are written, unfinished ones stay pending."""
    threading.Event().wait(grace_s())
    for fn in _LAST_WORDS:
        try:
            fn()
        except Exception:  # a forced exit goes on
            pass
    if not _SAID.is_set():
        line = _RESUME[0]() if _RESUME else ""
        print(f"stitchsweep: stopped by SIGTERM (forced after {grace_s():.0f} s); {line}", file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(EXIT_TERMINATED)
