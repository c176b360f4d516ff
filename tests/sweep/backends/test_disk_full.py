"""A worker's full disk stops the run (`sweep.backends.disk_full`): the `DiskFull` a trainable raised is found in
what Tune kept of the trial's error (however Ray wrapped it), other errors are not taken for one, and the
stopper ends the whole experiment at the first, the other running trials stopped (in a real Tune run: slow)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import cloudpickle
import pytest
from ray.exceptions import RayActorError, RayTaskError

from sweep.backends.disk_full import StopOnDiskFull, kept_disk_full
from sweep.store.storage import DiskFull


def kept(tmp_path, exc, name: str = "error.pkl") -> SimpleNamespace:
    """A trial whose last error Tune kept as its pickled exception (`Trial.handle_error`)."""
    path = tmp_path / name
    path.write_bytes(cloudpickle.dumps(exc))
    return SimpleNamespace(pickled_error_file=str(path))


def test_a_full_disk_is_found_in_the_error_tune_kept_and_stops_everything(tmp_path):
    full = DiskFull("/results/s/trials", 41_169)
    trial = kept(tmp_path, RayTaskError("_trainable", "Traceback (most recent call last): ...", full))
    got = kept_disk_full(trial)
    assert (type(got), got.folder, got.needed, str(got)) == (DiskFull, full.folder, 41_169, str(full))
    stop = StopOnDiskFull()
    assert not stop.stop_all() and stop(trial_id="t", result={}) is False
    assert stop.check(trial) and stop.stop_all() and stop.error.folder == full.folder
    second = kept(tmp_path, RayTaskError("_trainable", "...", DiskFull("/other", 1)), "second.pkl")
    assert stop.check(second) and stop.error.folder == full.folder  # the first is kept


def test_other_errors_are_no_full_disk(tmp_path):
    stop = StopOnDiskFull()
    others = [
        kept(tmp_path, RayActorError(), "actor.pkl"),  # a lost worker: Tune retries it
        kept(tmp_path, RayTaskError("_trainable", "...", ValueError("no")), "value.pkl"),
        SimpleNamespace(pickled_error_file=str(tmp_path / "none.pkl")),  # nothing kept
    ]
    assert not any(stop.check(t) for t in others) and not stop.stop_all() and stop.error is None


@pytest.mark.slow
@pytest.mark.ray
def test_a_trainable_on_a_full_disk_stops_the_tune_run_and_hands_back_the_others(tmp_path):
    """What `sweep.backends.ray` does with it: the stopper in the run's config, `check` on Tune's retry and
    error events. The unit that found the disk full is retried by Tune once at most before the stop; the
    one still running is stopped, not finished. (The `DiskFull` leaves the trainable unwrapped: a pickled
    exception keeps no `__cause__`, so one wrapped on a worker would arrive as its wrapper alone.)"""
    import ray
    from ray import tune

    def trainable(config):
        if config["unit"] == "full":
            time.sleep(1)
            raise DiskFull(str(tmp_path / "trials"), 1234)  # unwrapped, as `run_recorded` lets it through
        for i in range(120):
            tune.report({"i": i})
            time.sleep(0.5)

    stop = StopOnDiskFull()

    class Events(tune.Callback):
        def on_trial_recover(self, iteration, trials, trial, **info):
            stop.check(trial)

        def on_trial_error(self, iteration, trials, trial, **info):
            stop.check(trial)

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        t0 = time.perf_counter()
        results = tune.Tuner(
            tune.with_resources(trainable, {"cpu": 1}),
            param_space={"unit": tune.grid_search(["slow", "full"])},
            run_config=tune.RunConfig(
                storage_path=str(tmp_path / "_ray"),
                stop=stop,
                callbacks=[Events()],
                verbose=0,
                failure_config=tune.FailureConfig(max_failures=2),
            ),  # fmt: skip
        ).fit()
        wall = time.perf_counter() - t0
    finally:
        ray.shutdown()
    assert isinstance(stop.error, DiskFull) and stop.error.folder == str(tmp_path / "trials")
    assert stop.error.needed == 1234
    slow = next(r for r in results if r.config["unit"] == "slow")
    assert slow.metrics.get("i", 0) < 100 and wall < 50, (slow.metrics, wall)  # stopped, not run to its end
