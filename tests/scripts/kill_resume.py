"""SIGKILL the driver at a random moment, then `resume`: repeated, each time on fresh storage.

    .venv/bin/python tests/scripts/kill_resume.py [--repeats 5] [--seed 0]

The sweep is the test suite's tiny digits sweep grown to 12 trials (6 stitch points x tlm/dm). One
uninterrupted run first measures how long the whole sweep takes (T). Then, per repetition: `stitchsweep run`
on empty storage, a SIGKILL of the driver and every process it started (its embedded Ray) after U(0.5 s, T),
then `stitchsweep resume`. After each resume the script checks: exit code 0, exactly one row per planned trial
and per donor, every trial done, no temporary or corrupt file anywhere under the storage root. It prints one
line per repetition and exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import analysis  # noqa: E402
from sweep.config.space import parse_space  # noqa: E402
from sweep.store.compact import recorded_parts  # noqa: E402
from sweep.store.storage import open_root  # noqa: E402
from tests.conftest import TINY_SPACE  # noqa: E402

CLI = [sys.executable, "-m", "sweep"]


def space() -> dict:
    s = copy.deepcopy(TINY_SPACE)
    s["stitching"].update(stitch_points="all", objectives=["tlm", "dm"], epochs=2)
    return s


def _kill_driver(driver: subprocess.Popen) -> None:
    """SIGKILL the driver and everything it started, as a crash of the driver's machine would."""
    try:
        tree = psutil.Process(driver.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    os.kill(driver.pid, signal.SIGKILL)
    for p in tree:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    driver.wait(timeout=60)
    psutil.wait_procs(tree, timeout=30)


def _stage(log: str) -> str:
    """Where the driver was when it died, from its last progress line."""
    for line in reversed(log.splitlines()):
        if line.startswith("[zoo"):
            return "zoo"
        if line.startswith("[stitch"):
            return "stitch"
    return "startup"


def _files(root: Path, pattern: str) -> list[Path]:
    return [p for p in root.rglob(pattern) if "_ray" not in p.parts]


def repetition(space_file: Path, planned: set[str], kill_at: float | None, workdir: Path) -> dict:
    storage = workdir / "results"
    results = storage / "tiny"
    workdir.mkdir(parents=True)
    log_path = workdir / "driver.log"
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        driver = subprocess.Popen(
            [*CLI, "run", str(space_file), "--storage", str(storage), "--num-cpus", "2"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=REPO,
        )
        if kill_at is None:
            rc = driver.wait()
            return {"wall_s": time.perf_counter() - t0, "rc": rc}
        while driver.poll() is None and time.perf_counter() - t0 < kill_at:
            time.sleep(0.05)
        finished_first = driver.poll() is not None
        if not finished_first:
            _kill_driver(driver)
    at_kill = {
        "parts": len(recorded_parts(open_root(results / "trials"))),  # loose or compacted
        "tmp": len(_files(storage, ".tmp-*")) if storage.exists() else 0,
        "stage": "finished" if finished_first else _stage(log_path.read_text()),
    }
    resume_args = (
        [*CLI, "resume", str(results), "--num-cpus", "2"]
        if (results / "space.yaml").exists()
        else [*CLI, "run", str(space_file), "--storage", str(storage), "--num-cpus", "2"]
    )
    resumed = subprocess.run(resume_args, capture_output=True, text=True, cwd=REPO)
    trials = analysis.load_trials(results)
    donors = analysis.read_table(results, "donors").to_pandas()
    checks = {
        "resume exit 0": resumed.returncode == 0,
        "one row per trial": len(trials) == len(planned) and set(trials["trial_id"]) == planned,
        "every trial done": bool((trials["status"] == "done").all()),
        "one row per donor": len(donors) == 1,
        "no partial file": not _files(storage, ".tmp-*"),
        "no corrupt part": not _files(storage, "*.corrupt"),
    }
    return {
        "kill_at": kill_at,
        **at_kill,
        "rows": len(trials),
        "checks": checks,
        "resume_cmd": resume_args[3],
        "resume_tail": (resumed.stdout + resumed.stderr)[-2000:],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    s = space()
    planned = {t.trial_id for t in parse_space(s).trials}
    failed = 0
    with tempfile.TemporaryDirectory(prefix="kill-resume-") as tmp:
        space_file = Path(tmp) / "space.yaml"
        space_file.write_text(yaml.safe_dump(s, sort_keys=False))
        base = repetition(space_file, planned, None, Path(tmp) / "baseline")
        total = base["wall_s"]
        print(
            f"uninterrupted sweep: {len(planned)} trials + 1 donor in {total:.1f} s (exit {base['rc']});"
            f" kill moments drawn from U(0.5, {total:.1f}) s, seed {args.seed}",
            flush=True,
        )
        kills, attempt = 0, 0
        while kills < args.repeats and attempt < 3 * args.repeats:
            attempt += 1
            kill_at = rng.uniform(0.5, total)
            r = repetition(space_file, planned, kill_at, Path(tmp) / f"rep{attempt}")
            bad = [k for k, ok in r["checks"].items() if not ok]
            failed += bool(bad)
            counted = r["stage"] != "finished"  # the sweep ended before the kill: not a repetition
            kills += counted
            print(
                f"{f'rep {kills}' if counted else 'not counted'}: SIGKILL at {kill_at:5.1f} s ({r['stage']:8s})"
                f" parts={r['parts']:2d} tmp={r['tmp']} -> {r['resume_cmd']}: rows={r['rows']}/{len(planned)} "
                + ("all checks passed" if not bad else f"FAILED: {', '.join(bad)}\n{r['resume_tail']}"),
                flush=True,
            )
    print(f"{kills - failed} of {kills} repetitions left exactly one row per trial and no partial file")
    return 1 if failed or kills < args.repeats else 0


if __name__ == "__main__":
    sys.exit(main())
