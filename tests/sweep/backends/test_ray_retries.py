"""A unit whose trial Ray gave up on runs once more at the end of its stage (fast: no Ray is started; the
stage's experiments are replaced by a stand-in that reports Tune's events)."""

import io
from types import SimpleNamespace

from sweep.backends import ray as backend
from sweep.backends.progress import SweepProgress


def _trial(unit: str, n: int) -> SimpleNamespace:
    return SimpleNamespace(config={"unit": unit}, trial_id=f"{unit}_{n}")


def test_a_trial_ray_gave_up_on_runs_once_more_and_a_second_give_up_is_final(monkeypatch, tmp_path):
    out = io.StringIO()
    sweep = SweepProgress({"sleep": ("sleep", 3)}, out=out, live=False)
    progress = backend._Progress("sleep", "sleep", 3, lambda c: c["unit"], sweep)
    experiments = []

    def experiment(name, trainable, grid, resources, sweep_dir, prog, max_concurrent):
        n = len(experiments)
        experiments.append(list(grid))
        for unit in grid:
            trial = _trial(unit, n)
            prog.on_trial_start(0, [], trial)
            if unit == "b":  # Tune errors it: in the first experiment as after a lost node, then again
                prog.on_trial_error(0, [], trial)
            else:
                prog.on_trial_result(0, [], trial, {"status": "done"})
                prog.on_trial_complete(0, [], trial)

    monkeypatch.setattr(backend, "_experiment", experiment)
    backend._fit("sleep", None, ["a", "b", "c"], {}, None, progress, None)
    assert experiments == [["a", "b", "c"], ["b"]]  # once more, then no third time
    kind = sweep.kinds["sleep"]
    assert (kind.done, kind.failed, len(kind.running)) == (2, 1, 0)  # b counted once, as failed, not running
    assert "b: ray error; it runs again later" in out.getvalue()
    assert "b: ray error (after retries)" in out.getvalue()
