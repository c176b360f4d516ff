"""The soak (`tests/benchmarks/soak.py`), small: 300 sleeping units through `stitchsweep run` with seeded faults
(1% raising, 3 workers SIGKILLed, the driver SIGKILLed then `resume`, a full disk then `resume`), every unit
recorded exactly once and every failure an injected one; and its checks, on made-up logs, seeing what breaks."""

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.benchmarks import soak, soak_checks
from tests.benchmarks.soak_checks import unit_problems

# a run whose driver was killed (it had recorded "a"), then a resume that ended by itself
PHASES = [
    {"t0": 0.0, "t1": 10.0, "killed": True, "rc": -9, "recorded": {"a"}},
    {"t0": 11.0, "t1": 20.0, "killed": False, "rc": 0},
]


def _try(t0, end, t_end=None):
    return {"t0": t0, "pid": 1, "end": end, "t_end": t_end}


def test_faults_are_seeded_disjoint_and_where_the_phases_meet_them():
    f = soak.plan_faults(5000, 0)
    assert f == soak.plan_faults(5000, 0) and f != soak.plan_faults(5000, 1)
    assert len(f.raising) == 50 and len(f.kills) == 3 and 0.35 <= f.driver_at < 0.6
    assert all(250 <= i < 1500 for i in f.kills) and 3500 <= f.disk_full < 4500
    assert not f.raising & {*f.kills, f.disk_full}
    assert [f.of(i) for i in (min(f.raising), f.kills[0], f.disk_full)] == ["raise", "kill", "disk_full"]
    assert len(soak.plan_faults(300, 0).raising) == 3 and len(soak.plan_faults(50, 0).raising) == 1


def test_the_attempt_log_pairs_each_start_with_what_ended_it(tmp_path):
    for event, uid, t0 in [("start", "a", 1.0), ("start", "b", 2.0), ("hold", "a", 1.0), ("wrote", "b", 2.0),
                           ("start", "a", 5.0), ("skip", "b", None), ("wrote", "a", 5.0)]:  # fmt: skip
        soak.log_event(str(tmp_path), event, uid, t0)
    runs = soak_checks.attempts(soak_checks.read_attempts(tmp_path))
    assert [a["end"] for a in runs["a"]] == ["hold", "wrote"] and [a["end"] for a in runs["b"]] == ["wrote"]


def test_a_unit_cut_short_by_the_driver_kill_then_written_once_is_fine():
    assert unit_problems("b", [_try(1.0, None), _try(12.0, "wrote", 13.0)], 12.0, PHASES) == []
    assert unit_problems("c", [_try(2.0, "hold"), _try(3.0, "wrote", 4.0)], 3.0, PHASES) == []  # a worker kill


def test_the_checks_see_a_rerun_a_second_write_a_stray_cut_and_a_row_of_another_attempt():
    twice = unit_problems("b", [_try(1.0, "wrote", 2.0), _try(12.0, "wrote", 13.0)], 12.0, PHASES)
    assert twice == ["parts written twice", "units run again after they finished"]
    raised_again = unit_problems("b", [_try(12.0, "raise", 12.5), _try(13.0, "raise", 13.5)], None, PHASES)
    assert raised_again == ["units run again after they finished"]
    assert unit_problems("a", [_try(12.0, "raise", 12.5)], None, PHASES) == [
        "units run again after a stop that found them recorded"
    ]
    cut = unit_problems("b", [_try(12.0, None), _try(14.0, "wrote", 15.0)], 14.0, PHASES)
    assert cut == ["attempts cut short by no injected fault"]  # in the phase that ended by itself
    assert unit_problems("b", [_try(12.0, "wrote", 13.0)], 14.0, PHASES) == ["rows not written by their logged attempt"]


def test_the_row_checks_see_a_missing_unit_a_stray_failure_a_wrong_reason_and_a_part_twice(tmp_path):
    ids = ["u0", "u1", "u2"]
    (tmp_path / "soak").mkdir()

    def out(statuses, errors, files=(("u0", "u1", "u2"),)):
        for k, rows in enumerate(files):
            pq.write_table(pa.table({"unit_id": list(rows)}), tmp_path / "soak" / f"f{k}.parquet")
        rows = pd.DataFrame({"unit_id": ids[: len(statuses)], "status": statuses, "error": errors})
        return {"rows": rows, "ids": ids, "faults": soak.Faults(frozenset({1})), "results": tmp_path}

    reason = "RuntimeError: injected failure: u1"
    assert soak_checks.check_rows(out(["done", "failed", "done"], [None, reason, None])) == []
    found = soak_checks.check_rows(out(["done", "failed"], [None, reason]))
    assert found == ["2 rows, 2 ids, 3 planned; missing ['u2']"]
    found = soak_checks.check_rows(out(["failed", "failed", "done"], ["x", "RuntimeError: injected failure: u0", None]))
    assert found == ["failed but not injected: ['u0']; injected but not failed: []",
                     "2 failed rows without their injected reason, e.g. ['u0', 'u1']"]  # fmt: skip
    found = soak_checks.check_rows(out(["done", "failed", "done"], [None, "injected failure: u1", None], [ids, ["u2"]]))
    assert found == ["4 rows in the table's 2 files; ids more than once: ['u2']"]


@pytest.mark.slow
@pytest.mark.ray
def test_300_units_through_every_fault_are_each_recorded_once_and_every_failure_is_injected(tmp_path):
    out = soak.soak(tmp_path, 300, 8, 0.05, seed=0)
    assert soak_checks.check(out) == [], "\n".join(soak_checks.summary(out))
    phases = out["phases"]
    assert [p["killed"] or p["rc"] for p in phases] == [True, 3, 1]  # the driver killed, the disk full, done
    assert sum(len(p["worker_kills"]) for p in phases) == 3
    failed = out["rows"][out["rows"]["status"] == "failed"]
    assert sorted(failed["unit_id"]) == sorted(soak.unit_id(0, i) for i in out["faults"].raising)
