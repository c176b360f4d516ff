"""What the driver says of a trial Tune schedules again: "lost with its worker or node" only when Tune's kept
error says the actor died; an error the trainable raised is named instead."""

from types import SimpleNamespace

import cloudpickle
from ray.exceptions import RayActorError, RayTaskError

from sweep.backends.events import trial_error


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
