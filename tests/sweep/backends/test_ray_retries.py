"""The run's stages in its one Tune experiment, driven by a stand-in for Tune (fast: no Ray is started): a stage
ends (compaction, its kind's end) before the next stage's first unit, and a unit whose trial Ray gave up on
runs once more at the end of its stage."""

import io
from types import SimpleNamespace

from ray.tune.search import Searcher

import sweep.kinds  # noqa: F401  (registers the kinds before the tests replace the registry)
import sweep.registry
from sweep.backends import ray as backend
from sweep.backends.feed import SweepUnits
from sweep.backends.progress import SweepProgress


def _kind(stage: str, log: list) -> SimpleNamespace:
    def after_stage(sweep, sweep_dir):
        log.append(("end", stage))
        return []

    return SimpleNamespace(stage=stage, noun=stage, locality=None, label=str, after_stage=after_stage)


def _tune(feed: SweepUnits, stages, log: list, errors: set) -> None:
    """Tune with one slot: ask the feed, run the trial it names (Tune errors the units in `errors`), report."""
    for n in range(100):
        config = feed.suggest(f"t{n}")
        if config == Searcher.FINISHED:
            return
        trial = SimpleNamespace(config=config, trial_id=f"t{n}")
        log.append(config["unit"])
        stages.on_trial_start(0, [], trial)
        if config["unit"] in errors:  # Tune errors it: in the first pass as after a lost node, then again
            stages.on_trial_error(0, [], trial)
        else:
            stages.on_trial_result(0, [], trial, {"status": "done"})
            stages.on_trial_complete(0, [], trial)
        feed.on_trial_complete(trial.trial_id, error=config["unit"] in errors)
    raise AssertionError("the feed never finished")


def test_stages_end_before_the_next_begins_and_a_unit_ray_gave_up_on_runs_once_more(monkeypatch):
    log: list = []
    monkeypatch.setattr(sweep.registry, "KINDS", {"zoo": _kind("zoo", log), "sleep": _kind("sleep", log)})
    monkeypatch.setattr(backend, "runnable", lambda sweep, sweep_dir, name, ids: (list(ids), []))
    monkeypatch.setattr(backend, "compact_stage", lambda stage, sweep_dir: log.append(("compact", stage)))
    out = io.StringIO()
    progress = SweepProgress({"zoo": ("donor", 1), "sleep": ("unit", 3)}, out=out, live=False)
    plan = {"zoo": ["d"], "sleep": ["a", "b", "c"]}
    units = {k: {uid: uid for uid in ids} for k, ids in plan.items()}
    stages = backend._Stages(None, None, plan, units, progress, None)
    _tune(SweepUnits(stages.next), stages, log, errors={"b"})
    assert log == ["d", ("compact", "zoo"), ("end", "zoo"), "a", "b", "c", "b", ("compact", "sleep"), ("end", "sleep")]
    kind = progress.kinds["sleep"]
    assert (kind.done, kind.failed, len(kind.running)) == (2, 1, 0)  # b counted once, as failed, not running
    assert "b: ray error; it runs again later" in out.getvalue()
    assert "b: ray error (after retries)" in out.getvalue()
    assert stages.interrupted() is None and [s.stage for s in stages.summaries] == ["zoo", "sleep"]


def test_a_stage_cut_short_is_what_interrupted_says(monkeypatch):
    monkeypatch.setattr(sweep.registry, "KINDS", {"sleep": _kind("sleep", [])})
    monkeypatch.setattr(backend, "runnable", lambda sweep, sweep_dir, name, ids: (list(ids), []))
    progress = SweepProgress({"sleep": ("unit", 3)}, out=io.StringIO(), live=False)
    stages = backend._Stages(
        None, None, {"sleep": ["a", "b", "c"]}, {"sleep": dict.fromkeys("abc", "")}, progress, None
    )
    feed = SweepUnits(stages.next)
    trial = SimpleNamespace(config=feed.suggest("t0"), trial_id="t0")
    stages.on_trial_result(0, [], trial, {"status": "done"})
    stages.on_trial_complete(0, [], trial)  # then Ctrl+C: Tune stops, the feed is not asked again
    assert stages.interrupted() == "the sleep stage was interrupted with 2 of 3 trials unfinished"
