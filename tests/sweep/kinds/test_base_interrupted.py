"""A unit interrupted by its process's exit records nothing (it stays pending) instead of a failed row.

A Ray worker told to exit (its driver cancelled by SLURM, say) starts the interpreter's exit while a Tune trial
still runs in another thread; thread pools then refuse work ("cannot schedule new futures after shutdown", as
the worker cache's writer did in tests/project/test_slurm.py), and a row "failed" with that error would keep the unit
from running again on resubmission.
"""

import subprocess
import sys

from sweep.kinds.examples.table import TABLE as EXAMPLES_DIR
from sweep.store.results import SweepDir
from tests.conftest import REPO

CHILD = """
import sys, threading, time
from concurrent.futures import ThreadPoolExecutor
from sweep.kinds.examples.table import TABLE as EXAMPLES_DIR
from sweep.kinds.base import record_unit
from sweep.store.results import SweepDir

part = SweepDir(sys.argv[1], "s").part(EXAMPLES_DIR, "u1")
pool = ThreadPoolExecutor(1)
pool.submit(int).result()  # the pool's thread now waits for work


def measure():
    while threading.main_thread().is_alive():  # until the interpreter starts to exit
        time.sleep(0.01)
    time.sleep(0.3)  # the pool's thread sees the exit and shuts the pool
    pool.submit(int)  # what the worker cache's writer does: RuntimeError
    return [{}]


def unit():
    try:
        out = record_unit(part, EXAMPLES_DIR, {"unit_id": "u1"}, measure)
        print("recorded", out["status"], out["error"])
    except RuntimeError as exc:
        print("interrupted:", exc)


threading.Thread(target=unit).start()  # then the main thread ends: the interpreter starts to exit
"""


def test_a_unit_interrupted_by_the_process_exit_writes_no_part(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert "interrupted: cannot schedule new futures after shutdown" in out.stdout, out.stdout + out.stderr
    assert not SweepDir(tmp_path, "s").part(EXAMPLES_DIR, "u1").exists()


def test_a_unit_that_raises_while_its_process_runs_is_still_recorded_failed(tmp_path):
    from sweep.kinds.base import record_unit
    from sweep.store.results import read_status

    def measure():
        raise RuntimeError("cannot schedule new futures after shutdown")  # the same error, no exit under way

    part = SweepDir(tmp_path, "s").part(EXAMPLES_DIR, "u1")
    out = record_unit(part, EXAMPLES_DIR, {"unit_id": "u1"}, measure)
    assert out["status"] == "failed" and read_status(part) == "failed"


def test_a_unit_failing_once_the_interpreter_began_to_shut_down_writes_no_part(tmp_path, monkeypatch):
    """Python runs the threading atexit calls (thread pools then refuse work "after interpreter shutdown")
    before it marks the main thread stopped: a trial cut by `scancel` failed in that window and was recorded
    failed, so the resubmitted job skipped it (tests/project/test_slurm.py)."""
    import threading

    import pytest

    from sweep.kinds.base import record_unit

    def measure():
        raise RuntimeError("cannot schedule new futures after interpreter shutdown")

    monkeypatch.setattr(threading, "_SHUTTING_DOWN", True, raising=False)
    part = SweepDir(tmp_path, "s").part(EXAMPLES_DIR, "u1")
    with pytest.raises(RuntimeError, match="cannot schedule new futures after interpreter shutdown"):
        record_unit(part, EXAMPLES_DIR, {"unit_id": "u1"}, measure)
    assert not part.exists()
