"""What the driver does with Tune's events of a stage's trials: its progress lines and the whole sweep's counts
and ETA (`StageEvents`), and each finished unit's record mirrored to the trackers (`Tracking`). The Parquet
parts are the record; these only report, but for a unit whose worker Ray's memory monitor killed: its worker
wrote nothing, and the driver records it failed (`sweep.backends.kills`).

Ray 2.60 reports such a kill to the actor's caller as `ray.exceptions.OutOfMemoryError`, neither the
`RayActorError` of a dead actor nor the `RayTaskError` of a raising task, and Tune's actor manager stops the
whole experiment on any other error ("Caught unexpected exception"). The two patches below make it Tune's
case of a dead actor (`KilledForMemory`, a `RayActorError`: the actor is cleaned up and its trial fails) that
is never retried (the trial's `max_failures` becomes 0: the unit would be killed again); a worker or node lost
any other way is retried as before (`FailureConfig.max_failures`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ray import tune
from ray.air.execution._internal.actor_manager import RayActorManager
from ray.exceptions import OutOfMemoryError, RayActorError
from ray.tune.experiment import Trial

if TYPE_CHECKING:
    from sweep.backends.progress import SweepProgress
    from sweep.store.results import SweepDir


class StageEvents(tune.Callback):
    """Tune's events for one stage, as lines on the driver's stdout (the Parquet parts are the real record)
    and as the whole sweep's counts and ETA (`SweepProgress`)."""

    def __init__(self, stage: str, kind: str, total: int, label, sweep: SweepProgress, record=None) -> None:
        self.stage, self.kind, self.total, self.label, self.done = stage, kind, total, label, 0
        self.sweep = sweep
        # record(unit id, Ray's message, actor id) -> (error, parts written): a unit killed for memory, failed
        self.record = record
        self.finished = 0  # trials whose trainable returned its final status, or that Ray gave up on
        self.errored = 0  # trials Ray gave up on (their logs under _ray/ are kept)
        self.gave_up: (
            list | None
        ) = []  # their units, run once more by the stage (`sweep.backends.ray`) (None then: a second error is final)
        self.last: dict = {}
        self.workers: dict[tuple, dict] = {}  # (node, pid) -> its units and latest cache counters
        self.t0 = time.perf_counter()
        self.extra: list[tune.Callback] = []  # the stage's other callbacks (`Tracking`)
        self.held = 0  # the most trials Tune's controller held when one started (`Prune`)

    def worker_line(self) -> str:
        """How the stage's units spread over worker processes, and what their caches served."""
        w = self.workers.values()
        hits, misses = sum(x["hits"] for x in w), sum(x["misses"] for x in w)
        held = max((x["mb"] for x in w), default=0.0)
        return (
            f"[{self.stage}] {sum(x['units'] for x in w)} {self.kind} units ran in {len(w)} worker process(es);"
            f" worker cache: {hits} hits, {misses} misses, at most {held:.0f} MB held by a worker;"
            f" at most {self.held} trial(s) held by the driver at once"
        )

    def _prefix(self) -> str:
        return f"[{self.stage} {self.done}/{self.total} {time.perf_counter() - self.t0:6.0f}s]"

    def on_trial_start(self, iteration, trials, trial, **info):
        self.held = max(self.held, len(trials))  # Tune's own list
        self.sweep.started(self.kind, trial.config["unit"])  # the planned unit: its price

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.last[trial.trial_id] = result
        phase = result.get("phase")
        if phase == "zoo":  # donor training is the long part of a small sweep: show epochs
            line = f"epoch {result['epoch']}/{result['epochs']} train_loss={result['train_loss']:.3f}"
        elif phase == "fit":  # a long fit's heartbeat (the trial reports one at most every 30 s)
            line = f"fitting, epoch {result['epoch']}/{result['epochs']} train_loss={result['train_loss']:.3f}"
        else:
            return
        self.sweep.note(f"{self._prefix()} {self.label(trial.config)}: {line}")

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.done += 1
        r = self.last.pop(trial.trial_id, {})
        if "worker_pid" in r:
            w = self.workers.setdefault((r["worker_node"], r["worker_pid"]), {"units": 0})
            w.update(units=w["units"] + 1, hits=r["cache_hits"], misses=r["cache_misses"], mb=r["cache_mb"])
        status = r.get("status", "?")
        if "status" in r:
            self.finished += 1
        self.sweep.finished(self.kind, trial.config["unit"], failed=status != "done" and status != "skipped")
        detail = r.get("error") if status == "failed" else fmt_metrics(r)
        self.sweep.note(f"{self._prefix()} {self.label(trial.config)}: {status} {detail}")

    def on_trial_recover(self, iteration, trials, trial, **info):
        # Tune schedules the trial again (the trial is idempotent): its worker or node died, or the code around
        # its unit raised (a unit's own failures are recorded in its part and never reach Tune)
        died, why = trial_error(trial)
        what = "lost with its worker or node" if died else f"failed on its worker outside its unit ({why})"
        self.sweep.note(f"[{self.stage} {self.done}/{self.total}] {self.label(trial.config)}: {what}; retrying")

    def on_trial_error(self, iteration, trials, trial, **info):
        self.finished += 1
        killed = killed_for_memory(trial)
        if killed is not None and self.record is not None:
            return self._killed_for_memory(trial, killed)
        self.errored += 1
        if self.gave_up is not None:  # Tune errors a trial lost with its node when its dead actor's second
            # failed task arrives after the trial was requeued, whatever its retries left: run it again
            self.gave_up.append(trial.config["unit"])
            self.sweep.forget(self.kind, trial.config["unit"])
            return self.sweep.note(f"[{self.stage}] {self.label(trial.config)}: ray error; it runs again later")
        self.done += 1
        self.sweep.finished(self.kind, trial.config["unit"], failed=True)
        self.sweep.note(
            f"[{self.stage} {self.done}/{self.total}] {self.label(trial.config)}: ray error "
            f"(after retries); rerun with `stitchsweep resume`"
        )

    def _killed_for_memory(self, trial, killed: KilledForMemory) -> None:
        """Recorded failed from the driver (its worker, dead, wrote nothing), once: never retried."""
        self.done += 1
        uid = trial.config["unit"]
        error, written = self.record(uid, killed.error_msg, killed.actor_id)
        self.sweep.finished(self.kind, uid, failed=True)
        what = "recorded failed" if written else "its parts were written before"
        self.sweep.note(f"{self._prefix()} {self.label(trial.config)}: {what}, {error}")


class KilledForMemory(RayActorError):
    """The death of a trial's actor that Ray's memory monitor killed: `error_msg` is Ray's message (the node's
    memory, each worker it killed and what it held), `actor_id` the actor's."""

    def __init__(self, message: str = "", actor_id: str | None = None) -> None:
        super().__init__(actor_id, message)


def _actor_task_failed(self, tracked_actor_task, exception, _failed=RayActorManager._actor_task_failed):
    """Tune's actor manager on a failed actor task, with the memory monitor's kill as the actor's death."""
    if isinstance(exception, OutOfMemoryError):
        held = self._live_actors_to_ray_actors_resources.get(tracked_actor_task._tracked_actor)
        actor = held[0]._actor_id.hex() if held else None
        exception = KilledForMemory(str(exception), actor)
    return _failed(self, tracked_actor_task=tracked_actor_task, exception=exception)


def _handle_error(self, exc=None, _handle=Trial.handle_error):
    """Tune's count of a trial's failures (and its kept error), with no retry left after a memory kill."""
    if isinstance(exc, OutOfMemoryError):  # an actor killed while it started: reported as is
        exc = KilledForMemory(str(exc))
    _handle(self, exc)
    if isinstance(exc, KilledForMemory):
        self.max_failures = 0  # `Trial.should_recover`: failures <= max_failures


RayActorManager._actor_task_failed = _actor_task_failed  # Ray's version is pinned by the lock file:
Trial.handle_error = _handle_error  # tests/sweep/backends/test_events.py checks both on each upgrade


def kept_error(trial) -> BaseException | None:
    """What Tune kept of the trial's last error (its pickled exception), or None."""
    import cloudpickle

    try:
        with open(trial.pickled_error_file, "rb") as f:
            return cloudpickle.load(f)
    except Exception:  # nothing kept, or not readable here
        return None


def killed_for_memory(trial) -> KilledForMemory | None:
    exc = kept_error(trial)
    return exc if isinstance(exc, KilledForMemory) else None


def trial_error(trial) -> tuple[bool, str]:
    """(whether the trial's worker process or node died, the error's first line) from what Tune kept of the
    trial's last error (its pickled exception: a `RayActorError` when the actor died, a `RayTaskError` when the
    trainable raised)."""
    exc = kept_error(trial)
    if exc is None or isinstance(exc, RayActorError):  # nothing kept: say what Tune says, a lost worker
        return True, ""
    cause = getattr(exc, "cause", None) or exc
    lines = str(cause).strip().splitlines()
    return False, f"{type(cause).__name__}: {lines[0] if lines else ''}"


class Tracking(tune.Callback):
    """Each completed unit's record mirrored to the trackers (`sweep.backends.trackers`), from its parts: on the
    driver, after the unit wrote them; a tracker's failure is a printed note, never a failed unit."""

    def __init__(self, trackers: list, kind, units: dict, sweep_dir: SweepDir) -> None:
        self.trackers, self.kind, self.units, self.sweep_dir = trackers, kind, units, sweep_dir

    def on_trial_complete(self, iteration, trials, trial, **info):
        from sweep.backends.trackers import log_unit

        uid = trial.config["unit"]
        for note in log_unit(self.trackers, self.kind, uid, self.units[uid], self.sweep_dir):
            print(f"note: {note}", flush=True)


def fmt_metrics(r: dict) -> str:
    parts = []
    for k in ("clean_acc", "robust_acc"):
        if r.get(k) is not None:
            parts.append(f"{k}={r[k]:.3f}")
    return " ".join(parts)
