"""The driver's side of two faults, without Ray (`sweep.backends.kills`): a unit whose worker Ray's memory monitor
killed is recorded failed from the driver, with what its worker held and the fields that lower its need; SIGTERM
stops a command as Ctrl+C does, and within the grace when that stop hangs."""

import copy
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

from sweep.backends.kills import memory_error, stop_on_sigterm, unhook
from sweep.config.space import parse_space
from sweep.kinds.base import record_failed
from sweep.registry import KINDS
from sweep.store.results import SweepDir, read_status, recorded_row
from tests.conftest import REPO, TINY_SPACE

# Ray 2.60's message for a worker its memory monitor killed (the first lines of one seen on this machine, with a
# second worker selected, as the monitor may kill several)
RAY_OOM = (
    "1 worker(s) were killed due to the node running low on memory. Memory on the node (IP: 192.0.2.2, ID: af4e)"
    " was 4.74GB used / 23.54GB limit (0.201310)\nOOM kill reason: Memory usage 5088337920B exceeded threshold"
    " of 5055236608B (20.0% of 25276182528B limit)\nRay killed 2 worker(s) based on the killing policy\n"
    "Selected to kill: (Actor(aa11): job ID=01000000, lease ID=00ab, task name=ImplicitFunc.__init__, required"
    " resources={CPU_group_7c: 1, bundle_group_7c: 0.001}, pid=1499, actual memory used=0.41GB, worker ID=8070),"
    " (Actor(be68d0e3): job ID=01000000, lease ID=00cd, task name=ImplicitFunc.__init__, required resources="
    "{CPU_group_0_7c: 1}, pid=1507, actual memory used=3.19GB, worker ID=8071)\nTop 10 memory users: ..."
)


def _trial(indices=("cka",)):
    space = copy.deepcopy(TINY_SPACE)
    space["stitching"]["indices"] = list(indices)
    sweep = parse_space(space)
    return sweep, sweep.trials[0]


def test_the_error_names_the_killed_workers_memory_the_node_and_the_fields_that_lower_the_need():
    sweep, trial = _trial()
    error = memory_error(RAY_OOM, "be68d0e3", KINDS["trial"], trial, sweep)
    assert error.startswith(
        "killed for memory: Ray's memory monitor stopped its worker (pid 1507), which held 3.19 GB, with its node"
        " at 4.74 of 23.54 GB; raise resources.memory_per_trial (fewer units share a node), or lower"
        " stitching.similarity_samples ("
    ), error
    assert error.endswith(" now), or lower stitching.batch_size, then resume with --failed") and "\n" not in error
    # another actor's worker: the first the monitor names; a message of another form: no figure invented
    assert "(pid 1499), which held 0.41 GB" in memory_error(RAY_OOM, None, KINDS["trial"], trial, sweep)
    bare = memory_error("killed", None, KINDS["trial"], _trial(())[1], _trial(())[0])
    assert bare == (
        "killed for memory: Ray's memory monitor stopped its worker; raise resources.memory_per_trial (fewer units"
        " share a node), or lower stitching.batch_size, then resume with --failed"
    )


def test_the_driver_records_each_missing_part_failed_once(tmp_path):
    sweep, trial = _trial()
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    (part,) = KINDS["trial"].parts(sweep_dir, trial)
    assert record_failed(KINDS["trial"], trial, sweep_dir, "killed for memory: ...") == 1
    row = recorded_row(part)
    assert (row["trial_id"], row["status"], row["error"]) == (trial.trial_id, "failed", "killed for memory: ...")
    assert record_failed(KINDS["trial"], trial, sweep_dir, "again") == 0  # written: left as it is
    assert recorded_row(part)["error"] == "killed for memory: ..."
    # a kind whose table is none of the results tables: the columns a status reads
    odd = SimpleNamespace(
        table="no_such_table", key="unit_id", unit_id=str, parts=lambda d, u: [d.path / "odd" / f"{u}.parquet"]
    )
    assert record_failed(odd, "u1", sweep_dir, "killed") == 1
    assert read_status(sweep_dir.path / "odd" / "u1.parquet") == "failed"


CHILD = """
import signal, sys, time
from pathlib import Path
from sweep.backends.kills import at_forced_exit, stop_on_sigterm, terminated

if sys.argv[1] == "hangs":  # a stop that never ends (Ray's processes dying beside the driver can do that)
    signal.signal(signal.SIGINT, lambda signum, frame: None)
at_forced_exit(lambda: Path(sys.argv[2]).write_text("released"))
stop_on_sigterm(lambda: "Finish with: stitchsweep resume RESULTS")
try:  # "ready" inside: a SIGTERM that comes at once is caught too (a loaded machine)
    print("ready", flush=True)
    time.sleep(60)
except KeyboardInterrupt:
    print("stopped as on Ctrl+C; SIGTERM:", terminated(), flush=True)
"""


def _terminate(mode: str, tmp_path) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "STITCHSWEEP_TERM_GRACE_S": "2"}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, mode, str(tmp_path / "lease")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout.readline() == "ready\n"
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), time.monotonic() - t0


def test_sigterm_takes_the_path_of_ctrl_c(tmp_path):
    done, _ = _terminate("stops", tmp_path)
    assert done.returncode == 0 and done.stdout == "stopped as on Ctrl+C; SIGTERM: True\n", done
    assert not (tmp_path / "lease").exists()


def test_a_stop_that_hangs_ends_at_the_grace_with_the_resume_line(tmp_path):
    done, wall = _terminate("hangs", tmp_path)
    assert done.returncode == 143 and wall < 15, (done, wall)
    assert (
        done.stderr == "stitchsweep: stopped by SIGTERM (forced after 2 s); Finish with: stitchsweep resume RESULTS\n"
    )
    assert (tmp_path / "lease").read_text() == "released"


def test_a_command_run_inside_another_program_gives_its_sigterm_handler_back():
    before = signal.getsignal(signal.SIGTERM)
    stop_on_sigterm(lambda: "Finish with: ...")
    assert signal.getsignal(signal.SIGTERM) is not before
    stop_on_sigterm()  # again, after `ray.init`
    unhook()  # `main` returns
    assert signal.getsignal(signal.SIGTERM) is before
    stop_on_sigterm()  # nothing asked for it now
    assert signal.getsignal(signal.SIGTERM) is before
