"""Whole-sweep progress: done / running / pending / failed units of every kind, elapsed time and an ETA, shown
while a sweep runs (no Ray here: the backend feeds it events).

The ETA is the work left divided by the parallelism seen (the largest number of units seen running at once).
Units are grouped by kind and by the architectures their price reads (`prices`: `plan --estimate`'s per unit,
`sweep.planning.estimate.unit_prices`, in the order the stage starts them). A unit left counts, in this order: the
mean driver-side duration (start to finish, Ray's per-trial overhead included) of the finished units of its
group; else of its kind; else its price times measured / priced over the finished units the profile priced
whole at `FLOOR_S` or more (a price near zero, or one that lacked timings, never scales the others up; none
such finished yet: the price as it is); plus, if none of its kind has started, the start of its workers but the
one the stage before leaves (`stage_s` each, side by side); a unit without a price, the mean of every finished
unit. A running unit counts
what is left of that. So the ETA is a number from the first finished unit on; before it, the line says it waits
for one. The backend names a unit by its trial's id: a unit its price does not list takes the next planned
place of its kind (the stage hands them out in that order).

One clock: the `[sweep]` phase lines and the progress line count the elapsed time from the same start
(`START`, this module's import, the command line's first: near enough the driver's start).

On a terminal a tqdm bar sits below the event lines; elsewhere (CI, a log file) every event is one line and a
`[sweep]` summary line follows at most every `summary_every` seconds and at the end of each stage.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

# The least price of a unit that measured / priced is taken over: a price near zero says nothing of this machine's
# speed (the unit's start and end through Tune, on the driver's clock, are not in it)
FLOOR_S = 1.0


@dataclass
class _Group:
    """The units of one kind that read the same architectures: those not started yet (and their prices), and
    the measured durations of those finished."""

    pending: int = 0
    priced: float = 0.0
    measured: float = 0.0
    finished: int = 0

    def mean(self) -> float | None:
        return self.measured / self.finished if self.finished else None


@dataclass
class _Kind:
    noun: str
    total: int
    done: int = 0
    failed: int = 0
    running: dict = field(default_factory=dict)  # unit -> start time
    durations: list = field(default_factory=list)
    plan: list = field(default_factory=list)  # (group, price, priced whole) per planned unit, in their stage's order
    index: dict = field(default_factory=dict)  # a planned unit's id -> its place in `plan`
    groups: dict = field(default_factory=dict)  # group -> _Group
    places: dict = field(default_factory=dict)  # a running unit -> its place in `plan` (None: not planned)
    taken: set = field(default_factory=set)  # the places of units started (and not forgotten)
    again: list = field(default_factory=list)  # places of units that stopped unfinished: they run again
    next: int = 0  # the first place not yet taken, in order

    @property
    def pending(self) -> int:
        return self.total - self.done - self.failed - len(self.running)

    def mean(self) -> float | None:
        return sum(self.durations) / len(self.durations) if self.durations else None

    def planned(self, prices) -> None:
        """The kind's prices: a number (every unit's) or its units' `(unit, group, seconds, priced)` in order."""
        rows = [(None, "", float(prices), True)] * self.total if isinstance(prices, (int, float)) else prices
        for place, (unit, group, seconds, whole) in enumerate(rows):
            self.plan.append((group, float(seconds), bool(whole)))
            if unit is not None:
                self.index[unit] = place
            self.move(place, +1)

    def move(self, place: int, sign: int) -> None:
        """The planned unit at `place` leaves (-1: it started) or rejoins (+1) the units not started."""
        group, seconds, _ = self.plan[place]
        g = self.groups.setdefault(group, _Group())
        g.pending, g.priced = g.pending + sign, g.priced + sign * seconds

    def take(self, unit: str) -> int | None:
        """The planned place of a unit that starts: its own, else the next in order, else one to run again."""
        place = self.index.get(unit)
        if place is None or place in self.taken:
            while self.next in self.taken:
                self.next += 1
            place = self.next if self.next < len(self.plan) else (self.again.pop(0) if self.again else None)
        if place is not None:
            if place in self.again:
                self.again.remove(place)
            self.taken.add(place)
            self.move(place, -1)
        return place


def duration(seconds: float) -> str:
    """'45s', '12m05s', '3h07m'."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


START = time.monotonic()  # the driver's start, near enough: the command line imports this module first


def phase(what: str, out: TextIO | None = None, elapsed: float | None = None) -> None:
    """A `[sweep]` line saying what the driver does now (before the first unit: Ray, workers, data), with the
    seconds since the driver started (`elapsed`, else since `START`: the progress line's clock too)."""
    elapsed = time.monotonic() - START if elapsed is None else elapsed
    print(f"[sweep] {what} ({duration(elapsed)} elapsed)", file=out or sys.stdout, flush=True)


class SweepProgress:
    """Counts and ETA of a whole sweep (every kind it runs), fed by `started` / `finished` / `note` events."""

    def __init__(
        self,
        totals: dict[str, tuple[str, int]],
        *,
        clock: Callable[[], float] = time.monotonic,
        out: TextIO | None = None,
        live: bool | None = None,
        summary_every: float = 15.0,
        prices: dict | None = None,
        stage_s: float = 0.0,
        start: float | None = None,
    ) -> None:
        """`prices`: per kind, the cost model's seconds of each unit (a number) or its units' prices in the order
        its stage runs them (`sweep.planning.estimate.unit_prices`); `stage_s`: its fixed cost of a stage; `start`:
        when the elapsed time starts (default: `START` on the real clock, else now)."""
        self.kinds = {name: _Kind(noun, total) for name, (noun, total) in totals.items()}
        for name, kind_prices in (prices or {}).items():
            if name in self.kinds:
                self.kinds[name].planned(kind_prices)
        self.stage_s = stage_s
        self._measured = self._priced = 0.0  # over the finished units priced whole: measured / priced scales prices
        self.clock, self._out = clock, out
        self.t0 = start if start is not None else START if clock is time.monotonic else clock()
        self.parallel = 1
        self.summary_every, self._last_summary = summary_every, self.t0
        notebook = live is None and in_notebook()
        self.live = (self.out.isatty() or notebook) if live is None else live
        self._bar = None
        if self.live:
            total = sum(k.total for k in self.kinds.values())
            self._bar = _bar(total, self.out, notebook)

    @property
    def out(self) -> TextIO:
        """The stream given, else the current `sys.stdout` (looked up when written to)."""
        return self._out or sys.stdout

    def __getstate__(self) -> dict:
        """Picklable (Ray Tune saves its callbacks with the experiment's state): without the stream and bar."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_out", "_bar")} | {"_out": None, "_bar": None}

    # events
    def started(self, kind: str, unit: str) -> None:
        k = self.kinds[kind]
        k.running[unit] = self.clock()
        k.places[unit] = k.take(unit)
        self.parallel = max(self.parallel, sum(len(x.running) for x in self.kinds.values()))
        self._refresh()

    def finished(self, kind: str, unit: str, failed: bool = False) -> None:
        k = self.kinds[kind]
        start, place = k.running.pop(unit, None), k.places.pop(unit, None)
        if start is not None:
            took = self.clock() - start
            k.durations.append(took)
            if place is not None:
                group, seconds, whole = k.plan[place]
                g = k.groups[group]
                g.measured, g.finished = g.measured + took, g.finished + 1
                if whole and seconds >= FLOOR_S:
                    self._measured, self._priced = self._measured + took, self._priced + seconds
        if failed:
            k.failed += 1
        else:
            k.done += 1
        if self._bar is not None:
            self._bar.update(1)
        self._refresh()

    def forget(self, kind: str, unit: str) -> None:
        """`unit` of `kind` stopped without finishing (it will run again under another id)."""
        k = self.kinds[kind]
        k.running.pop(unit, None)
        place = k.places.pop(unit, None)
        if place is not None:
            k.taken.discard(place)
            k.again.append(place)
            k.move(place, +1)
        self._refresh()

    def skip(self, kind: str, n: int) -> None:
        """`n` units of `kind` will not run in this sweep (blocked): they leave the counts."""
        self.kinds[kind].total -= n
        if self._bar is not None:
            self._bar.total -= n
        self._refresh()

    def note(self, line: str) -> None:
        """An event line (a finished unit, a heartbeat): above the bar on a terminal, else a line of its own,
        followed by a summary when one is due."""
        if self._bar is not None:
            self._bar.write(line, file=self.out)
            return
        print(line, file=self.out, flush=True)
        if self.clock() - self._last_summary >= self.summary_every:
            self.summary()

    def summary(self) -> None:
        """The `[sweep]` line (off a terminal; the bar shows the same there)."""
        self._last_summary = self.clock()
        if self._bar is None:
            print(f"[sweep] {self.line()}", file=self.out, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    # what it shows
    def eta(self) -> float | None:
        """Seconds left, or None while no unit has finished (nothing measured on this machine yet)."""
        finished = [d for k in self.kinds.values() for d in k.durations]
        if not finished:
            return None
        scale = self._measured / self._priced if self._priced > 0 else None
        overall, now, work = sum(finished) / len(finished), self.clock(), 0.0
        for k in self.kinds.values():
            if k.pending + len(k.running) == 0:
                continue
            if k.mean() is None and not k.running and k.done + k.failed == 0:  # a stage to come: its workers
                work += self.stage_s * (scale or 1.0) * (self.parallel - 1)  # but the one kept start beside it
            for unit, t in k.running.items():
                place = k.places.get(unit)
                group, seconds, _ = k.plan[place] if place is not None else (None, None, True)
                work += max(_each(k, k.groups.get(group), seconds, scale, overall) - (now - t), 0.0)
            work += _left(k, scale, overall)
        return work / self.parallel

    def phase(self, what: str) -> None:
        """A driver's phase before units run (starting workers, loading data): a `[sweep]` line, its elapsed
        time on the progress line's clock."""
        if self._bar is not None:
            self._bar.write(f"[sweep] {what}", file=self.out)
            return
        phase(what, self.out, elapsed=self.clock() - self.t0)

    def line(self) -> str:
        """'12/82 done (1 failed), 2 running, 68 pending; 3m12s elapsed, ETA 14m05s'."""
        kinds = self.kinds.values()
        total = sum(k.total for k in kinds)
        done, failed = sum(k.done for k in kinds), sum(k.failed for k in kinds)
        running, pending = sum(len(k.running) for k in kinds), sum(k.pending for k in kinds)
        eta = self.eta()
        eta_text = f"ETA {duration(eta)}" if eta is not None else "ETA after the first unit ends"
        failed_text = f" ({failed} failed)" if failed else ""
        return (
            f"{done + failed}/{total} finished{failed_text}, {running} running, {pending} pending; "
            f"{duration(self.clock() - self.t0)} elapsed, {eta_text}"
        )

    def _refresh(self) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(self.line(), refresh=True)


def _each(k: _Kind, group: _Group | None, seconds: float | None, scale: float | None, overall: float) -> float:
    """The seconds one unit of `k` counts: its group's mean, else its kind's, else its price x `scale` (none yet:
    its price), else (no price) the mean of every finished unit."""
    for known in (group.mean() if group is not None else None, k.mean()):
        if known is not None:
            return known
    return seconds * (scale or 1.0) if seconds is not None else overall


def _left(k: _Kind, scale: float | None, overall: float) -> float:
    """The seconds of `k`'s units not started, group by group (`_each`), in proportion where its counts have
    moved apart from its plan (blocked units, units it did not plan)."""
    planned = sum(g.pending for g in k.groups.values() if g.pending > 0)
    if not planned:
        return k.pending * _each(k, None, None, scale, overall)
    left = 0.0
    for g in k.groups.values():
        if g.pending <= 0:
            continue
        known = g.mean() if g.finished else k.mean()
        if known is not None:
            left += g.pending * known
        else:
            left += g.priced * (scale or 1.0)
    return left * k.pending / planned


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (IPython's ZMQ shell): its output is a cell, not a terminal."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return type(shell).__name__ == "ZMQInteractiveShell"


def _bar(total: int, out: TextIO, notebook: bool):
    """A tqdm bar of `total` units: in a notebook its widget bar where ipywidgets is installed, else the text bar."""
    if notebook:
        try:
            import ipywidgets  # noqa: F401  (tqdm's notebook bar draws with it)
            from tqdm.notebook import tqdm as notebook_bar

            return notebook_bar(total=total, bar_format="{l_bar}{bar}| {postfix}")
        except ImportError:
            pass
    from tqdm import tqdm

    return tqdm(total=total, file=out, dynamic_ncols=True, bar_format="{l_bar}{bar}| {postfix}")
