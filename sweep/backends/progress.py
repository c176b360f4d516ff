"""Whole-sweep progress: done / running / pending / failed units of every kind, elapsed time and an ETA, shown
while a sweep runs (no Ray here: the backend feeds it events).

The ETA is the work left divided by the parallelism seen: each pending unit counts the mean driver-side
duration of the finished units of its kind (start to finish, Ray's per-trial overhead included), each running
unit what is left of that mean; the parallelism is the largest number of units seen running at once. A kind
without a finished unit yet counts the cost model's price of its units (`prices`: `plan --estimate`'s, per unit)
times measured / priced of the units finished so far (this machine, its load), plus, if none of its units has
started, the start of its workers but the one the stage before leaves (`stage_s` each, side by side); a kind
with no price, the mean of every finished unit. So the ETA
is a number from the first finished unit on; before it, the line says it waits for one.

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


START = time.monotonic()  # the driver's start, near enough: the command line imports this module first


def phase(what: str, out: TextIO | None = None, elapsed: float | None = None) -> None:
    """A `[sweep]` line saying what the driver does now (before the first unit: Ray, workers, data), with the
    seconds since the driver started (`elapsed`, else since this module's import)."""
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
        prices: dict[str, float] | None = None,
        stage_s: float = 0.0,
    ) -> None:
        self.kinds = {name: _Kind(noun, total) for name, (noun, total) in totals.items()}
        self.prices, self.stage_s = dict(prices or {}), stage_s  # the cost model's seconds per unit, per stage
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

    def forget(self, kind: str, unit: str) -> None:
        """`unit` of `kind` stopped without finishing (it will run again under another id)."""
        self.kinds[kind].running.pop(unit, None)
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
        scale, overall = self._scale(), sum(finished) / len(finished)
        now, work = self.clock(), 0.0
        for name, k in self.kinds.items():
            if k.pending + len(k.running) == 0:
                continue
            mean = k.mean()
            if mean is None:
                price = self.prices.get(name)
                mean = overall if price is None or scale is None else price * scale
                if not k.running and k.done + k.failed == 0:  # a stage to come: its workers but the one kept
                    work += self.stage_s * (scale or 1.0) * (self.parallel - 1)  # start beside it
            work += k.pending * mean + sum(max(mean - (now - t), 0.0) for t in k.running.values())
        return work / self.parallel

    def _scale(self) -> float | None:
        """Measured / priced over the finished units of the priced kinds (None: none finished)."""
        measured = priced = 0.0
        for name, k in self.kinds.items():
            if name in self.prices and k.durations:
                measured, priced = measured + sum(k.durations), priced + self.prices[name] * len(k.durations)
        return measured / priced if priced > 0 else None

    def phase(self, what: str) -> None:
        """A driver's phase before units run (starting workers, loading data): a `[sweep]` line."""
        if self._bar is not None:
            self._bar.write(f"[sweep] {what}", file=self.out)
            return
        phase(what, self.out)

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
