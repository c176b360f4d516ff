"""Whole-sweep progress: done / running / pending / failed units of every kind, elapsed time and an ETA, shown
while a sweep runs (no Ray here: the backend feeds it events).

The ETA is the work left divided by the parallelism seen: each pending unit counts the mean driver-side
duration of the finished units of its kind (start to finish, Ray's per-trial overhead included), each running
unit what is left of that mean; the parallelism is the largest number of units seen running at once. Until a
kind has a finished unit its pending units have no duration, and the ETA says so instead of guessing.

On a terminal a tqdm bar sits below the event lines; elsewhere (CI, a log file) every event is one line and a
`[sweep]` summary line follows at most every `summary_every` seconds and at the end of each stage.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO


@dataclass
class _Kind:
    noun: str
    total: int
    done: int = 0
    failed: int = 0
    running: dict = field(default_factory=dict)  # unit -> start time
    durations: list = field(default_factory=list)

    @property
    def pending(self) -> int:
        return self.total - self.done - self.failed - len(self.running)

    def mean(self) -> float | None:
        return sum(self.durations) / len(self.durations) if self.durations else None


def duration(seconds: float) -> str:
    """'45s', '12m05s', '3h07m'."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


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
    ) -> None:
        self.kinds = {name: _Kind(noun, total) for name, (noun, total) in totals.items()}
        self.clock, self._out = clock, out
        self.t0 = clock()
        self.parallel = 1
        self.summary_every, self._last_summary = summary_every, self.t0
        self.live = self.out.isatty() if live is None else live
        self._bar = None
        if self.live:
            from tqdm import tqdm

            total = sum(k.total for k in self.kinds.values())
            self._bar = tqdm(total=total, file=self.out, dynamic_ncols=True, bar_format="{l_bar}{bar}| {postfix}")

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
        self.parallel = max(self.parallel, sum(len(x.running) for x in self.kinds.values()))
        self._refresh()

    def finished(self, kind: str, unit: str, failed: bool = False) -> None:
        k = self.kinds[kind]
        start = k.running.pop(unit, None)
        if start is not None:
            k.durations.append(self.clock() - start)
        if failed:
            k.failed += 1
        else:
            k.done += 1
        if self._bar is not None:
            self._bar.update(1)
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
        """Seconds left, or None while a kind with units left has no finished unit to time."""
        now, work = self.clock(), 0.0
        for k in self.kinds.values():
            if k.pending + len(k.running) == 0:
                continue
            mean = k.mean()
            if mean is None:
                return None
            work += k.pending * mean + sum(max(mean - (now - t), 0.0) for t in k.running.values())
        return work / self.parallel

    def line(self) -> str:
        """'12/82 done (1 failed), 2 running, 68 pending; 3m12s elapsed, ETA 14m05s'."""
        kinds = self.kinds.values()
        total = sum(k.total for k in kinds)
        done, failed = sum(k.done for k in kinds), sum(k.failed for k in kinds)
        running, pending = sum(len(k.running) for k in kinds), sum(k.pending for k in kinds)
        eta = self.eta()
        waiting = next((k.noun for k in kinds if k.mean() is None and k.pending + len(k.running)), "unit")
        eta_text = f"ETA {duration(eta)}" if eta is not None else f"ETA after the first {waiting.rstrip('s')} ends"
        failed_text = f" ({failed} failed)" if failed else ""
        return (
            f"{done + failed}/{total} finished{failed_text}, {running} running, {pending} pending; "
            f"{duration(self.clock() - self.t0)} elapsed, {eta_text}"
        )

    def _refresh(self) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(self.line(), refresh=True)
