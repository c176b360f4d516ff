"""How the driver-side bookkeeping scales with the number of trials (no Ray, no training).

For a search space (default: the largest shipped one, search_spaces/tlm_vs_dm_cifar10.yaml, 7,040 trials):
  plan    : parse and expand the space (what `plan`, `run` and `resume` all do first)
  write   : write one small part per trial (as finished trials would)
  pending : `run`/`resume`'s scan of which trials are recorded (one listing, then each part's status)
  load    : `analysis.load_trials` of every part (what `status` and `report` read)
  then the parts compacted (as a finished stage leaves them), the pending scan and the load again
on a local folder and, with --s3, on a moto S3 server on loopback (started by this script).

    .venv/bin/python tests/benchmarks/scale.py [SPACE] [--s3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import analysis  # noqa: E402
from sweep.config.space import load_space  # noqa: E402
from sweep.planning.planning import progress  # noqa: E402
from sweep.store.results import SweepDir, write_rows  # noqa: E402
from sweep.store.schema import trial_schema  # noqa: E402


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def measure(space, root: str, label: str) -> None:
    sweep_dir = SweepDir(root, space.name)
    sweep_dir.create()
    ids = [s.trial_id for s in space.trials]

    def write_all():
        with ThreadPoolExecutor(max_workers=16) as pool:
            list(
                pool.map(
                    lambda i: write_rows(sweep_dir.trial_part(i), [{"trial_id": i, "status": "done"}], trial_schema()),
                    ids,
                )
            )

    _, t_write = _timed(write_all)
    prog, t_pending = _timed(lambda: progress(space, sweep_dir, kinds=["trial"])["trial"])
    assert len(prog.done) == len(ids) and not prog.pending, (len(prog.done), len(prog.pending))
    trials, t_load = _timed(lambda: analysis.load_trials(sweep_dir.path))
    assert len(trials) == len(ids)
    print(
        f"{label:6s} trials={len(ids)} write={t_write:.1f}s (16 threads) pending-scan={t_pending:.1f}s"
        f" load_trials={t_load:.1f}s",
        flush=True,
    )
    measure_compacted(space, sweep_dir, label)


def measure_compacted(space, sweep_dir: SweepDir, label: str) -> None:
    """The same scan and read once the parts are compacted (what a finished stage leaves)."""
    from sweep.store.compact import compact

    _, t_compact = _timed(lambda: compact(sweep_dir.path, ["trials"]))
    prog, t_pending = _timed(lambda: progress(space, sweep_dir, kinds=["trial"])["trial"])
    assert len(prog.done) == len(space.trials) and not prog.pending, (len(prog.done), len(prog.pending))
    trials, t_load = _timed(lambda: analysis.load_trials(sweep_dir.path))
    assert len(trials) == len(space.trials) and trials["trial_id"].is_unique
    files = len(sweep_dir.trials.files(".parquet"))
    print(
        f"{label:6s} compacted into {files} file(s) in {t_compact:.1f}s: pending-scan={t_pending:.1f}s"
        f" load_trials={t_load:.1f}s",
        flush=True,
    )


def _moto() -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = shutil.which("moto_server", path=os.path.dirname(sys.executable))
    proc = subprocess.Popen(
        [server, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    import pyarrow.fs as pafs

    pafs.S3FileSystem(endpoint_override=f"127.0.0.1:{port}", scheme="http", allow_bucket_creation=True).create_dir(
        "bench"
    )
    return proc, f"s3://bench/scale?endpoint_override=127.0.0.1:{port}&scheme=http"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("space", nargs="?", default=str(REPO / "search_spaces" / "tlm_vs_dm_cifar10.yaml"))
    ap.add_argument("--s3", action="store_true", help="also measure on a moto S3 server on loopback")
    args = ap.parse_args()
    space, t_plan = _timed(lambda: load_space(args.space))
    print(
        f"plan   {Path(args.space).name}: {len(space.trials)} trials, {len(space.donors)} donors in {t_plan:.1f}s",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        measure(space, tmp, "local")
    if args.s3:
        proc, uri = _moto()
        try:
            measure(space, uri, "s3")
        finally:
            proc.terminate()
            proc.wait(timeout=20)


if __name__ == "__main__":
    main()
