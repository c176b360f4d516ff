"""A stage's feed to Tune, without starting Ray: the units in order through Tune's own concurrency limiter, the
slots a cluster's resources give, and what a finished trial keeps in the driver."""

import pickle

import pytest

pytest.importorskip("ray.tune")

from ray.tune.experiment.trial import Trial  # noqa: E402
from ray.tune.search import ConcurrencyLimiter, Searcher  # noqa: E402

from sweep.backends.feed import Forget, Prune, SweepUnits, prune, slots  # noqa: E402


def _stages(*stages):
    """A `next_units` that gives these (kind, ids) one after another, recording when it was asked."""
    asked, left = [], list(stages)

    def next_units():
        asked.append(len(left))
        return left.pop(0) if left else None

    return next_units, asked


def test_units_are_handed_out_in_order_as_slots_free_then_finished():
    next_units, asked = _stages(("k", ["a", "b", "c"]))
    feed = ConcurrencyLimiter(SweepUnits(next_units), max_concurrent=2)  # what TuneConfig wraps it in
    assert feed.suggest("t1") == {"kind": "k", "unit": "a"} and feed.suggest("t2") == {"kind": "k", "unit": "b"}
    assert feed.suggest("t3") is None  # two live: no third until one ends
    feed.on_trial_complete("t1", result={"status": "done"})
    assert feed.suggest("t3") == {"kind": "k", "unit": "c"}
    feed.on_trial_complete("t2", result={})
    assert feed.suggest("t4") is None  # t3 runs: the end of the stage waits for it
    feed.on_trial_complete("t3", result={})
    assert feed.suggest("t4") == Searcher.FINISHED and feed.suggest("t5") == Searcher.FINISHED
    assert asked == [1, 0]  # asked for the next stage once at the start, once when the last trial ended


def test_a_stage_starts_only_once_every_trial_of_the_stage_before_finished():
    next_units, asked = _stages(("zoo", ["d1", "d2"]), ("stitch", ["t"]), ("reptest", []), ("more", ["m"]))
    feed = SweepUnits(next_units)
    assert [feed.suggest(i)["unit"] for i in ("1", "2")] == ["d1", "d2"]
    feed.on_trial_complete("2", error=True)  # an error ends a trial too
    assert feed.suggest("3") is None and len(asked) == 1  # d1 still runs: the trials' donors are not all there
    feed.on_trial_complete("1")
    assert feed.suggest("3") == {"kind": "stitch", "unit": "t"}
    feed.on_trial_complete("3")
    assert feed.suggest("4") == {"kind": "more", "unit": "m"}  # a stage with nothing to run is passed over
    feed.on_trial_complete("4")
    assert feed.suggest("5") == Searcher.FINISHED and asked == [4, 3, 2, 1, 0]


def test_slots_are_the_units_that_fit_in_the_cluster_unless_given():
    assert slots({"cpu": 2 / 16, "gpu": 0}, {"CPU": 2.0}, None) == 16
    assert slots({"cpu": 2 / 3, "gpu": 0}, {"CPU": 2.0}, None) == 3  # 2 / (2/3) is 2.9999... in floats
    assert slots({"cpu": 1, "gpu": 0.5}, {"CPU": 16.0, "GPU": 1.0}, None) == 2  # the scarcest resource
    assert slots({"cpu": 1, "gpu": 0, "memory": 3 * 2**30}, {"CPU": 8.0, "memory": 10 * 2**30}, None) == 3
    assert slots({"cpu": 4, "gpu": 0}, {"CPU": 2.0}, None) == 1  # refused earlier (check_resources); never 0
    assert slots({"cpu": 0.5, "gpu": 0}, {"CPU": 2.0}, 3) == 3  # --max-concurrent


def _finished_trial() -> Trial:
    trial = Trial("sleep", config={"unit": "u1"}, stub=True)
    metrics = {f"metric_{i}": float(i) for i in range(20)}
    for step in range(1, 4):
        trial.update_last_result({"status": "done", "training_iteration": step, **metrics})
    return trial


def test_a_finished_trial_keeps_its_config_and_status_not_its_results():
    trial = _finished_trial()
    before = len(pickle.dumps(trial.run_metadata))
    trial._default_result_or_future = object()  # stands for the reference Tune keeps to its actor's metrics
    assert set(trial.run_metadata.metric_analysis) >= {f"metric_{i}" for i in range(20)}
    Forget().on_trial_complete(0, [trial], trial)
    assert trial.run_metadata.metric_analysis == {} and trial.run_metadata.metric_n_steps == {}
    assert trial.config == {"unit": "u1"} and trial.last_result == {
        "trial_id": trial.trial_id,
        "training_iteration": 3,
        "done": True,
    }
    assert len(pickle.dumps(trial.run_metadata)) < before / 5  # the statistics were most of its bytes
    assert trial._default_result_or_future is None
    errored = _finished_trial()
    Forget().on_trial_error(0, [errored], errored)
    assert errored.run_metadata.metric_analysis == {}


def test_tunes_own_progress_callback_is_replaced_and_prints_nothing(capsys):
    from ray.tune.progress_reporter import TrialProgressCallback

    trial = _finished_trial()
    quiet = Forget()
    assert isinstance(quiet, TrialProgressCallback)  # so Tune adds none of its own
    quiet.on_trial_result(0, [trial], trial, trial.last_result)
    quiet.on_trial_complete(0, [trial], trial)
    assert capsys.readouterr().out == ""


def test_the_feed_saves_and_restores_where_it_stands(tmp_path):
    feed = SweepUnits(_stages(("k", ["a", "b", "c"]))[0])
    feed.suggest("t1")
    feed.save(str(tmp_path / "searcher.pkl"))
    again = SweepUnits(_stages()[0])
    again.restore(str(tmp_path / "searcher.pkl"))
    assert again.suggest("t2") == {"kind": "k", "unit": "b"}


class _Controller:
    """The parts of Tune's controller (Ray 2.60's `TuneController`) that `prune` reads and edits."""

    def __init__(self, trials: list[Trial]) -> None:
        self._trials, self._live_trials = list(trials), set()
        self._stopped_trials = {t for t in trials if t.status == Trial.TERMINATED}
        self._trial_to_actor, self._trials_to_cache = {}, set(trials)
        self._trial_metadata = {t.trial_id: ("{}", "{}") for t in trials}


def test_prune_drops_the_trials_tune_stopped_and_keeps_those_it_still_uses():
    done, running, reused, errored = (Trial("sleep", config={"unit": u}, stub=True) for u in "abcd")
    for trial, status in ((done, Trial.TERMINATED), (running, Trial.RUNNING), (reused, Trial.TERMINATED)):
        trial.set_status(status)
    errored.set_status(Trial.ERROR)
    controller = _Controller([done, running, reused, errored])
    controller._live_trials, controller._trial_to_actor = {running}, {reused: "actor"}  # not yet detached
    kept = prune(controller, [done, running, reused, errored])
    assert kept == [running, reused, errored]
    assert controller._trials == [running, reused, errored] and controller._stopped_trials == {reused}
    assert done not in controller._trials_to_cache and done.trial_id not in controller._trial_metadata
    assert running.trial_id in controller._trial_metadata


def test_prune_edits_attributes_that_tunes_controller_has():
    import inspect

    from ray.tune.execution.tune_controller import TrialRunnerWrapper, TuneController

    source = inspect.getsource(TuneController.__init__)
    for name in (
        "_trials",
        "_live_trials",
        "_stopped_trials",
        "_trial_to_actor",
        "_trials_to_cache",
        "_trial_metadata",
    ):
        assert f"self.{name}:" in source or f"self.{name} =" in source, name
    assert "self._tune_controller = tune_controller" in inspect.getsource(TrialRunnerWrapper.__init__)


def test_tunes_count_of_the_callbacks_imports_no_tracker_when_usage_statistics_are_off():
    """Ray's usage statistics (off on the lean node) counted the callbacks by importing MLflow (1.1 s a run)."""
    import subprocess
    import sys

    code = (
        "import os, sys; os.environ['RAY_USAGE_STATS_ENABLED'] = '0'\n"
        "import sweep.backends.ray\n"
        "from ray.air._internal import usage\n"
        "from sweep.backends.feed import Forget\n"
        "usage.tag_callbacks([Forget()])\n"
        "print('mlflow' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr[-2000:]


def test_the_feed_keeps_the_slots_and_lets_go_of_trials_tune_ended_without_a_word():
    """Tune errors a trial whose reused actor could not be reset without telling the search algorithm: the feed
    drops it from its live trials (else the stage would wait for it for ever), and only it."""
    feed = ConcurrencyLimiter(SweepUnits(_stages(("k", ["a", "b", "c"]))[0]), max_concurrent=2)
    inner = feed.searcher
    assert inner.max_concurrent == 2  # the limiter left the limit to the feed
    assert feed.suggest("t1")["unit"] == "a" and feed.suggest("t2")["unit"] == "b" and feed.suggest("t3") is None
    lost, running = (Trial("sleep", config={"unit": u}, stub=True, trial_id=t) for u, t in (("a", "t1"), ("b", "t2")))
    lost.set_status(Trial.ERROR)
    running.set_status(Trial.RUNNING)
    assert inner.settle([lost, running]) == [lost] and inner.live == {"t2"}
    assert feed.suggest("t3")["unit"] == "c"


def test_prune_takes_a_trial_that_completed_twice_once():
    """A trial whose stop raised is requeued and completes again: one entry, and no error when it is gone."""
    scheduler = Prune()
    trial = Trial("sleep", config={"unit": "a"}, stub=True)
    trial.set_status(Trial.TERMINATED)
    scheduler.on_trial_complete(None, trial, {})
    scheduler.on_trial_complete(None, trial, {})
    assert scheduler.finished == [trial]
    controller = _Controller([trial])
    assert prune(controller, [trial]) == [] and prune(controller, [trial]) == [] and controller._trials == []
