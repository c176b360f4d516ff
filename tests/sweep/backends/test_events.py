"""What the driver says of a trial Tune schedules again: "lost with its worker or node" only when Tune's kept
error says the actor died; an error the trainable raised is named instead. A worker Ray's memory monitor killed
is the death of its actor to Tune (not an error that stops the experiment) and its trial is not retried."""

from types import SimpleNamespace

import cloudpickle
import pytest
from ray.air.execution._internal.actor_manager import RayActorManager
from ray.exceptions import OutOfMemoryError, RayActorError, RayTaskError
from ray.tune.experiment import Trial

from sweep.backends.events import KilledForMemory, killed_for_memory, trial_error


def kept(tmp_path, exc) -> SimpleNamespace:
    """A trial whose last error Tune kept as its pickled exception (`Trial.handle_error`)."""
    path = tmp_path / "error.pkl"
    path.write_bytes(cloudpickle.dumps(exc))
    return SimpleNamespace(pickled_error_file=str(path))


def test_a_dead_actor_is_a_lost_worker(tmp_path):
    assert trial_error(kept(tmp_path, RayActorError())) == (True, "")


def test_an_error_the_trainable_raised_is_named_not_taken_for_a_lost_worker(tmp_path):
    cause = ImportError("No module named 'checks'")
    exc = RayTaskError("_trainable", "Traceback (most recent call last): ...", cause)
    assert trial_error(kept(tmp_path, exc)) == (False, "ImportError: No module named 'checks'")


def test_without_a_kept_error_it_says_what_tune_says(tmp_path):
    assert trial_error(SimpleNamespace(pickled_error_file=str(tmp_path / "none.pkl"))) == (True, "")


def test_a_worker_killed_for_memory_is_its_actors_death_to_tune_not_the_end_of_the_experiment():
    """Ray 2.60's actor manager raises "Caught unexpected exception" (ending `Tuner.fit`) on an error that is
    neither a dead actor nor a raising task, which is what the memory monitor's kill is."""
    heard = []

    class Tracked:  # Tune's `TrackedActor`: hashed by identity
        actor_id = 1
        _on_error = staticmethod(lambda tracked, exc: heard.append(("actor", exc)))

    actor = Tracked()
    task = SimpleNamespace(_tracked_actor=actor, _on_error=lambda tracked, exc: heard.append(("task", exc)))
    ray_actor = SimpleNamespace(_actor_id=SimpleNamespace(hex=lambda: "be68d0e3"))
    manager = object.__new__(RayActorManager)  # only what a failed task reads
    manager._failed_actor_ids, manager._live_actors_to_ray_actors_resources = set(), {actor: (ray_actor, None)}
    manager._cleanup_actor = lambda tracked_actor: manager._live_actors_to_ray_actors_resources.pop(tracked_actor)
    manager._actor_task_failed(tracked_actor_task=task, exception=OutOfMemoryError("1 worker(s) were killed ..."))
    assert [who for who, _ in heard] == ["actor", "task"] and manager._failed_actor_ids == {1}
    exc = heard[1][1]
    assert isinstance(exc, KilledForMemory) and (exc.error_msg, exc.actor_id) == (
        "1 worker(s) were killed ...",
        "be68d0e3",
    )
    with pytest.raises(RuntimeError, match="Caught unexpected exception"):  # any other error: as Tune does
        manager._actor_task_failed(tracked_actor_task=task, exception=ValueError("?"))


def test_a_trial_killed_for_memory_is_not_retried_and_a_lost_one_is(tmp_path):
    trial = Trial("unit", stub=True, max_failures=2)
    trial.storage = SimpleNamespace(trial_driver_staging_path=str(tmp_path))  # where Tune keeps its errors
    trial.handle_error(RayActorError())
    assert trial.should_recover() and trial_error(trial) == (True, "") and killed_for_memory(trial) is None
    trial.handle_error(KilledForMemory("1 worker(s) were killed ...", "be68d0e3"))
    assert not trial.should_recover()
    kept = killed_for_memory(trial)  # the driver reads it back to record the unit
    assert (kept.error_msg, kept.actor_id) == ("1 worker(s) were killed ...", "be68d0e3")
    raw = Trial("unit", stub=True, max_failures=2)  # killed while its actor started: Tune's error as Ray raised it
    raw.storage = SimpleNamespace(trial_driver_staging_path=str(tmp_path / "raw"))
    (tmp_path / "raw").mkdir()
    raw.handle_error(OutOfMemoryError("killed"))
    assert not raw.should_recover() and killed_for_memory(raw).error_msg == "killed"
