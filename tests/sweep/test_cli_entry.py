"""`stitchsweep`'s entry point: `main`, then an exit that skips the interpreter's teardown of modules but not what
the teardown would have finished: threads that are not daemons, exit handlers, buffered output, the exit code."""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import atexit, sys, threading, time
    from pathlib import Path

    late = Path(sys.argv[1])

    def late_file():
        time.sleep(0.5)
        late.write_text("written")

    threading.Thread(target=late_file).start()  # not a daemon: the exit waits for it
    atexit.register(lambda: print("exit handler ran"))
    sys.argv = ["stitchsweep", *sys.argv[2:]]
    from sweep.cli import entry
    entry()
    print("never printed")
    """
)


def _run(tmp_path, *args):
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "late.txt"), *args], capture_output=True, text=True, timeout=120
    )


def test_the_exit_waits_for_threads_runs_exit_handlers_and_flushes_the_output(tmp_path):
    out = _run(tmp_path, "schema")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "late.txt").read_text() == "written"
    assert '"$schema"' in out.stdout  # the command's output reached the pipe (block-buffered there)
    assert out.stdout.rstrip().endswith("exit handler ran")
    assert "never printed" not in out.stdout


def test_the_exit_keeps_the_commands_exit_code(tmp_path):
    out = _run(tmp_path, "plan", str(tmp_path / "missing.yaml"))
    assert out.returncode == 2
    assert "stitchsweep: error:" in out.stderr
    assert (tmp_path / "late.txt").read_text() == "written"
