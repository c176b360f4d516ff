"""A worker's full disk stops the whole run, not one unit: a `DiskFull` (raised by the store's writers past the
unit's record, `sweep.kinds.base.not_a_failure`) leaves the trainable; the driver finds it in what Tune kept of
the trial's error and stops the experiment at the first one, as Ctrl+C does (the running units are handed back
and stay pending), then ends the command in one line naming the folder and the bytes the write needed."""

from __future__ import annotations

import logging

from ray import tune

from sweep.store.storage import DiskFull, disk_full_in


def kept_disk_full(trial) -> DiskFull | None:
    """The `DiskFull` a trial's trainable raised, from Tune's kept error (its pickled exception: a `RayTaskError`
    whose cause is, or was raised from, one; a plain OSError of a full disk counts), else None."""
    import cloudpickle

    try:
        with open(trial.pickled_error_file, "rb") as f:
            exc = cloudpickle.load(f)
    except Exception:  # nothing kept, or not readable here: no full disk known
        return None
    return disk_full_in(exc)


class StopOnDiskFull(tune.Stopper):
    """Tune's stopper of a run: nothing per trial; the whole experiment once `check` met a trial whose worker
    found its disk full (`error`: the first such `DiskFull`, for the driver to raise after the experiment)."""

    def __init__(self) -> None:
        self.error: DiskFull | None = None

    def __call__(self, trial_id: str, result: dict) -> bool:
        return False

    def stop_all(self) -> bool:
        return self.error is not None

    def check(self, trial) -> bool:
        """Whether `trial` (one Tune errored or is about to retry) failed on a full disk; the first is kept."""
        full = kept_disk_full(trial)
        if full is not None and self.error is None:
            self.error = full
        return full is not None


class _QuietDiskFull(logging.Filter):
    """Tune's traceback of a trial whose worker found its disk full (`Trial task failed`, 48 lines): the
    command's last line says what happened and what to do. Other trials' errors are logged as before."""

    def filter(self, record: logging.LogRecord) -> bool:
        info = record.exc_info
        exc = info[1] if isinstance(info, tuple) else info if isinstance(info, BaseException) else None
        return exc is None or "Trial task failed" not in record.getMessage() or disk_full_in(exc) is None


logging.getLogger("ray.tune.execution.tune_controller").addFilter(_QuietDiskFull())
