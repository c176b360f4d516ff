"""The engine at scale, small: `tests/benchmarks/scale_ray.py`'s sleeping units through `stitchsweep run`, the
driver SIGKILLed half way, then `resume` (exactly-once, not speed; the benchmark measures speed); a stage as
one Tune experiment on the same actors, interrupted with Ctrl+C."""

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.benchmarks import scale_ray


def _rows(ids, ends):
    return pd.DataFrame({"unit_id": ids, "status": "done", "t_start": [e - 1 for e in ends], "t_end": ends})


def test_the_exactly_once_check_sees_a_lost_a_repeated_and_a_rerun_unit():
    ok = {"rows": _rows(["a", "b", "c"], [1.0, 2.0, 3.0]), "before_kill": {"a": 1.0, "b": 2.0}}
    assert scale_ray.exactly_once(ok, 3) == []
    lost = dict(ok, rows=_rows(["a", "b"], [1.0, 2.0]))
    assert "2 rows, 2 distinct ids, 3 units planned" in scale_ray.exactly_once(lost, 3)[0]
    twice = dict(ok, rows=_rows(["a", "b", "c", "c"], [1.0, 2.0, 3.0, 3.5]))
    assert "4 rows, 3 distinct ids" in scale_ray.exactly_once(twice, 3)[0]
    again = dict(ok, rows=_rows(["a", "b", "b", "c"], [1.0, 2.0, 2.5, 3.0]))  # recorded, then run again
    assert scale_ray.exactly_once(again, 3)[1:] == ["1 units recorded before the kill ran again, e.g. ['b']"]
    rerun = dict(ok, rows=_rows(["a", "b", "c"], [1.0, 2.5, 3.0]))
    assert scale_ray.exactly_once(rerun, 3) == ["1 units recorded before the kill ran again, e.g. ['b']"]


def test_busy_slots_per_window_count_the_units_running_in_each():
    rows = pd.DataFrame({"t_start": [0.0, 0.0, 15.0], "t_end": [10.0, 5.0, 20.0]})
    assert scale_ray.busy_windows(rows, 0.0, 2) == [1.5, 0.5]  # 10 + 5 s in the first, 5 s in the second


def test_durations_are_seeded_lognormal_around_the_median_and_capped():
    d = scale_ray.durations(4001, 3, 0.5, 5.0)
    assert d == scale_ray.durations(4001, 3, 0.5, 5.0) and d != scale_ray.durations(4001, 4, 0.5, 5.0)
    assert sorted(d)[2000] == pytest.approx(0.5, rel=0.05)  # the median of 4,001 draws: within a few percent
    assert max(scale_ray.durations(100, 0, 10.0, 5.0)) == 5.0 and scale_ray.durations(3, 0, 0.0, 5.0) == [0.0] * 3


@pytest.mark.slow
@pytest.mark.ray
def test_500_units_killed_half_way_and_resumed_are_each_recorded_once(tmp_path):
    out = scale_ray.sweep_once(tmp_path, 500, 8, 0.05, kill_at=0.5)
    assert out["run"]["killed"] and out["resume"]["rc"] == 0
    assert 250 <= len(out["before_kill"]) < 500  # killed half way, not after the end
    assert scale_ray.exactly_once(out, 500) == []
    # the resumed stage's 250 or so trials went through Tune's controller a few at a time (`Prune`)
    held = re.search(r"at most (\d+) trial\(s\) held by the driver", (tmp_path / "resume.log").read_text())
    assert held and int(held.group(1)) <= 2 * 8, held


def _interrupt_once(cmd: list[str], parts, count: int, log) -> tuple[int, int]:
    """Run `cmd`, SIGINT it once `count` parts exist; (its exit status, Tune experiments seen at that time)."""
    with open(log, "w") as out:
        driver = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=scale_ray._env(), cwd=scale_ray.REPO)
        try:
            deadline = time.time() + 400
            while not parts.is_dir() or sum(1 for _ in os.scandir(parts)) < count:
                assert driver.poll() is None and time.time() < deadline, Path(log).read_text()[-3000:]
                time.sleep(0.2)
            experiments = len(list((parts.parent / "_ray").glob("sleep-*")))
            os.kill(driver.pid, signal.SIGINT)
            return driver.wait(timeout=120), experiments
        finally:
            if driver.poll() is None:
                driver.kill()


@pytest.mark.slow
@pytest.mark.ray
def test_a_stage_is_one_experiment_on_the_same_actors_and_ctrl_c_leaves_the_rest_pending(tmp_path):
    """120 units on 4 slots: one Tune experiment, each of its units run by one of at most 4 worker processes
    (actors live as long as the stage); Ctrl+C stops the sweep with the rest pending, which `resume` runs."""
    n, slots = 120, 4
    space = scale_ray.write_space(tmp_path / "space.yaml", n, slots, 0.2)
    storage, results = tmp_path / "results", tmp_path / "results" / "scale_ray"
    run = scale_ray._cli(["run", str(space), "--storage", str(storage), "--num-cpus", "2"])
    rc, experiments = _interrupt_once(run, results / "sleep", 40, tmp_path / "run.log")
    out = (tmp_path / "run.log").read_text()
    assert rc == 130 and "the sleep stage was interrupted" in out, out[-3000:]
    assert experiments == 1 and len(list((results / "_ray").glob("sleep-*"))) == 1
    first = scale_ray.read_rows(results)
    assert 40 <= len(first) < n and first["worker_pid"].nunique() <= slots
    status = subprocess.run(scale_ray._cli(["status", str(results)]), capture_output=True, text=True,
                            env=scale_ray._env(), cwd=scale_ray.REPO).stdout  # fmt: skip
    assert f"{len(first)} done, 0 failed, {n - len(first)} pending" in status, status
    resumed = subprocess.run(scale_ray._cli(["resume", str(results), "--num-cpus", "2"]), capture_output=True,
                             text=True, env=scale_ray._env(), cwd=scale_ray.REPO)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    rows = scale_ray.read_rows(results)
    assert len(rows) == rows["unit_id"].nunique() == n
    assert rows[~rows["unit_id"].isin(first["unit_id"])]["worker_pid"].nunique() <= slots
    assert not list((results / "_ray").glob("sleep-*")), "Ray's records of a clean stage are removed"


def test_a_sleep_unit_whose_part_exists_is_skipped_not_run_again(tmp_path):
    """A trial Ray retries after its node died may find its unit's part written: the row must stay the first."""
    from types import SimpleNamespace

    from sweep.store.results import SweepDir

    ctx = SimpleNamespace(sweep_dir=SweepDir(tmp_path, "s"))
    assert scale_ray.run_unit(("u", 0.0), ctx)["status"] == "done"
    part = scale_ray._parts(ctx.sweep_dir, ("u", 0.0))[0]
    first = pd.read_parquet(part.path)["t_end"][0]
    assert scale_ray.run_unit(("u", 0.0), ctx)["status"] == "skipped"
    assert pd.read_parquet(part.path)["t_end"][0] == first  # the first run's own value, read back
