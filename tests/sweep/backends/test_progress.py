"""The whole-sweep progress line and its ETA, on a fake clock (no timing of real work)."""

import io

import pytest

from sweep.backends.progress import SweepProgress, duration, phase


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _simulate(progress, clock, kind, n, seconds, parallel, until=None):
    """Run `n` units of `seconds` each, `parallel` at a time, advancing the fake clock; stop at `until`."""
    queue = [f"{kind}-{i}" for i in range(n)]
    running: dict[str, float] = {}
    while queue or running:
        while queue and len(running) < parallel:
            unit = queue.pop(0)
            progress.started(kind, unit)
            running[unit] = clock.t + seconds
        unit, end = min(running.items(), key=lambda kv: kv[1])
        if until is not None and end > until:
            clock.t = until
            return
        clock.t = end
        del running[unit]
        progress.finished(kind, unit)


def test_a_20_minute_sweep_has_a_correct_eta_within_its_first_quarter():
    """40 trials of 60 s, two at a time: 20 minutes. After 5 minutes the ETA is the 15 minutes left."""
    clock = Clock()
    p = SweepProgress({"trial": ("trials", 40)}, clock=clock, out=io.StringIO(), live=False)
    _simulate(p, clock, "trial", 40, 60.0, 2, until=300.0)
    assert p.eta() == pytest.approx(900.0, rel=0.05)
    assert p.line().startswith("10/40 finished, 2 running, 28 pending; 5m00s elapsed, ETA 15m")


def test_eta_waits_only_for_the_first_finished_unit_and_weighs_kinds_by_their_own_durations():
    clock = Clock()
    p = SweepProgress({"donor": ("donors", 2), "trial": ("trials", 10)}, clock=clock, out=io.StringIO(), live=False)
    assert p.eta() is None and "ETA after the first unit ends" in p.line()
    _simulate(p, clock, "donor", 2, 100.0, 2)
    # no price for trials: they count the mean of every finished unit (100 s), 10 of them two at a time
    assert p.eta() == pytest.approx(500.0)
    _simulate(p, clock, "trial", 2, 10.0, 2)  # two trials of 10 s: 8 left, two at a time
    assert p.eta() == pytest.approx(40.0)
    p.finished("trial", "never-started", failed=True)
    assert "(1 failed)" in p.line()


def test_off_a_terminal_events_are_lines_and_a_summary_follows_at_most_every_interval():
    clock, out = Clock(), io.StringIO()
    p = SweepProgress({"trial": ("trials", 3)}, clock=clock, out=out, live=False, summary_every=15.0)
    p.started("trial", "a")
    clock.t = 10.0
    p.finished("trial", "a")
    p.note("[stitch 1/3] a: done")
    clock.t = 20.0
    p.note("[stitch 1/3] b: fitting, epoch 2/4")
    lines = out.getvalue().splitlines()
    assert lines == ["[stitch 1/3] a: done", "[stitch 1/3] b: fitting, epoch 2/4", lines[2]]
    assert lines[2].startswith("[sweep] 1/3 finished, 0 running, 2 pending; 20s elapsed, ETA 20s")


def test_on_a_terminal_a_bar_carries_the_counts():
    clock, out = Clock(), io.StringIO()
    p = SweepProgress({"trial": ("trials", 2)}, clock=clock, out=out, live=True)
    p.started("trial", "a")
    clock.t = 5.0
    p.finished("trial", "a")
    p.note("[stitch 1/2] a: done")
    p.close()
    text = out.getvalue()
    assert "[stitch 1/2] a: done" in text and "1/2 finished" in text and "ETA 5s" in text


@pytest.mark.parametrize("seconds, text", [(5, "5s"), (65, "1m05s"), (3 * 3600 + 7 * 60, "3h07m")])
def test_durations_read_as_people_write_them(seconds, text):
    assert duration(seconds) == text


def test_a_numeric_eta_from_the_first_finished_unit_priced_for_the_kinds_not_yet_seen():
    """The similarity unit runs last: before it starts, its ETA comes from its price scaled by measured /
    priced of the units that finished (here 2x slower than priced), plus its stage's fixed cost (the workers
    that start beside the one the stage before keeps)."""
    clock, out = Clock(), io.StringIO()
    totals = {"donor": ("donors", 2), "trial": ("trials", 4), "similarity": ("similarity units", 1)}
    prices = {"donor": 10.0, "trial": 5.0, "similarity": 30.0}
    p = SweepProgress(totals, clock=clock, out=out, live=False, prices=prices, stage_s=3.0)
    p.started("donor", "d0")
    p.started("donor", "d1")
    assert "ETA after the first unit ends" in p.line()
    clock.t = 20.0
    p.finished("donor", "d0")  # 20 s against a price of 10: this machine runs at 2x the prices
    # left: d1 (20 s mean, 20 s elapsed: 0), 4 trials x 5 x 2, their stage 3 x 2 x (2 - 1) workers started,
    # 1 x 30 x 2, the similarity stage 3 x 2 x (2 - 1); over 2 at once
    assert p.eta() == pytest.approx((0 + 40 + 6 + 60 + 6) / 2)
    assert "ETA 56s" in p.line() and "ETA 0s" not in p.line()


def test_phase_lines_say_what_the_driver_does_before_the_first_unit():
    out = io.StringIO()
    phase("starting Ray (a local node) and importing Tune", out, elapsed=3.0)
    p = SweepProgress({"trial": ("trials", 1)}, clock=Clock(), out=out, live=False)
    p.phase("stitch: starting workers for 1 trials")
    lines = out.getvalue().splitlines()
    assert lines[0] == "[sweep] starting Ray (a local node) and importing Tune (3s elapsed)"
    assert lines[1].startswith("[sweep] stitch: starting workers for 1 trials (") and lines[1].endswith("elapsed)")


def test_a_unit_class_priced_near_zero_does_not_blow_the_eta_up_once_one_of_it_finished():
    """A user's report: donors of a network the profile priced at almost nothing (0.01 s) take 20 s each. Their
    ratio (2,000x) must not scale the trials' prices; once a donor finished, the other donors count its 20 s,
    the trials their price; once a trial finished, its class counts its measured mean, the kind's other
    classes the kind's mean."""
    clock = Clock()
    totals = {"donor": ("donors", 3), "trial": ("trials", 6)}
    prices = {
        "donor": [(f"d{i}", "tiny_cnn", 0.01, True) for i in range(3)],
        "trial": [(f"t{i}", "tiny_cnn", 5.0, True) for i in range(3)]
        + [(f"t{i}", "resnet_tiny+tiny_cnn", 10.0, True) for i in range(3, 6)],
    }
    p = SweepProgress(totals, clock=clock, out=io.StringIO(), live=False, prices=prices, stage_s=0.0)
    p.started("donor", "d0")
    p.started("donor", "d1")
    clock.t = 20.0
    p.finished("donor", "d0")
    p.finished("donor", "d1")
    # left: d2 at its class's 20 s, then 3 x 5 + 3 x 10 s of trials at their prices; two at a time
    assert p.eta() == pytest.approx((20 + 15 + 30) / 2)
    _simulate(p, clock, "donor", 1, 20.0, 2)
    p.started("trial", "t0")
    clock.t += 8.0
    p.finished("trial", "t0")  # 8 s a trial: the five left count that (none of the other class finished)
    assert p.eta() == pytest.approx(5 * 8 / 2)
    assert "ETA 20s" in p.line()


def test_units_named_by_their_trials_ids_take_the_planned_places_in_order():
    """The backend names a unit by its trial's id, not the unit's: it takes its kind's next planned place, so
    its class is the planned unit's; a unit stopped unfinished gives its place back."""
    clock = Clock()
    prices = {"trial": [("a", "cheap", 2.0, True), ("b", "dear", 20.0, True), ("c", "dear", 20.0, True)]}
    p = SweepProgress({"trial": ("trials", 3)}, clock=clock, out=io.StringIO(), live=False, prices=prices)
    p.started("trial", "trial_00001")  # takes "a"'s place
    clock.t = 4.0
    p.finished("trial", "trial_00001")
    assert p.eta() == pytest.approx(2 * 4.0)  # no dear one finished: they count the kind's mean
    p.started("trial", "trial_00002")  # "b"
    p.forget("trial", "trial_00002")  # lost with its worker: it runs again under another id
    p.started("trial", "trial_00003")  # "b" again
    clock.t = 34.0
    p.finished("trial", "trial_00003")  # the dear class at 30 s: "c" counts that, not the kind's 17 s
    assert p.eta() == pytest.approx(30.0)
    p.started("trial", "trial_00004")  # "c"
    clock.t = 44.0
    assert p.eta() == pytest.approx(20.0)
    assert p.line().startswith("2/3 finished, 1 running, 0 pending")


def test_one_elapsed_clock_for_the_phase_lines_and_the_progress_line():
    """The `[sweep]` phase lines and the progress line count from the same start: the driver's (`START`) on the
    real clock, the one given on another."""
    from sweep.backends import progress

    assert SweepProgress({"trial": ("trials", 1)}, out=io.StringIO(), live=False).t0 == progress.START
    clock, out = Clock(), io.StringIO()
    p = SweepProgress({"trial": ("trials", 1)}, clock=clock, out=out, live=False, start=-8.0)
    clock.t = 56.0
    p.phase("stitch: 1 unit(s), on a worker of the stage before")
    assert out.getvalue().strip().endswith("(1m04s elapsed)")
    assert "; 1m04s elapsed, " in p.line()
