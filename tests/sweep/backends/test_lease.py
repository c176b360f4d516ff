"""One driver per sweep: a second `run`/`resume` of a sweep whose driver is alive is refused; a lease left by a
driver that is gone (its process dead on this host, or its heartbeat stale) is taken over."""

import json
import socket
import subprocess
import sys
import time

import pytest

from sweep.backends.lease import LEASE_FILE, STALE_S, Lease
from sweep.config.errors import SpecError
from sweep.store.results import SweepDir


@pytest.fixture
def sweep_dir(tmp_path):
    d = SweepDir(tmp_path, "s")
    d.create()
    return d


def _hold(sweep_dir, pid, host=None, beat=None):
    doc = {"pid": pid, "host": host or socket.gethostname(), "started": "earlier", "beat": beat or time.time()}
    (sweep_dir.path / LEASE_FILE).write_text(json.dumps(doc))


def test_a_second_driver_is_refused_while_the_first_is_alive(sweep_dir):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        _hold(sweep_dir, other.pid)
        with pytest.raises(SpecError) as err:
            with Lease(sweep_dir):
                pass
        assert str(err.value).startswith("RESULTS: expected a sweep no other driver is running")
        assert f"pid {other.pid} on {socket.gethostname()}" in str(err.value)
    finally:
        other.kill()
        other.wait()


def test_a_lease_of_a_dead_process_or_with_a_stale_heartbeat_is_taken_over(sweep_dir, capsys):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    _hold(sweep_dir, int(gone.stdout))  # fresh heartbeat, but its process has exited
    with Lease(sweep_dir):
        assert json.loads((sweep_dir.path / LEASE_FILE).read_text())["pid"] != int(gone.stdout)
    assert "taking over the lease" in capsys.readouterr().out
    _hold(sweep_dir, 1, host="another-host", beat=time.time() - STALE_S - 1)  # silent for too long
    with Lease(sweep_dir):
        pass
    assert not (sweep_dir.path / LEASE_FILE).exists()  # released at the end


def test_the_heartbeat_renews_the_lease_while_the_driver_runs(sweep_dir):
    with Lease(sweep_dir, heartbeat_s=0.05):
        first = json.loads((sweep_dir.path / LEASE_FILE).read_text())["beat"]
        time.sleep(0.3)
        assert json.loads((sweep_dir.path / LEASE_FILE).read_text())["beat"] > first


def test_resume_is_refused_with_one_line_while_another_driver_runs(tiny_space, tmp_path, capsys):
    import yaml

    from sweep.cli import main

    d = SweepDir(tmp_path, "tiny")
    d.create()
    d.space.write_text(yaml.safe_dump(tiny_space))
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        _hold(d, other.pid)
        assert main(["resume", str(d.path)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "no other driver is running" in err
        assert not list(d.donors.files(".parquet"))  # nothing ran
    finally:
        other.kill()
        other.wait()
