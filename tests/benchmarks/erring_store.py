"""What an object store that errs costs the store's bookkeeping: N one-row trial parts written, their statuses
scanned (as `run`/`resume`/`status` do), compacted, and read back (`analysis.load_trials`), on a moto S3 server on
loopback (started here) behind the erring proxy of the tests (tests/sweep/store/erring_s3.py), at each error rate
given (a share of requests answered 500 InternalError / 503 SlowDown / 503 ServiceUnavailable, seeded). Prints
each step's seconds, the requests and injected errors, the store's own retries (`sweep.store.retry`), whether
every id was counted once, and the compaction's read-back of its file (the check before any part is deleted).

    .venv/bin/python tests/benchmarks/erring_store.py [--parts 200] [--rates 0 0.2] [--seed 0]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import analysis  # noqa: E402
from sweep.planning.planning import statuses  # noqa: E402
from sweep.store import compact as compaction  # noqa: E402
from sweep.store.results import SweepDir, write_rows  # noqa: E402
from sweep.store.schema import trial_schema  # noqa: E402
from sweep.store.storage import open_root  # noqa: E402
from tests.sweep.store.erring_s3 import ErringS3  # noqa: E402

BUCKET = "bench"


class Retries(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0

    def emit(self, record) -> None:
        self.count += 1


def _moto() -> tuple[subprocess.Popen, str]:
    server = shutil.which("moto_server", path=os.path.dirname(sys.executable)) or shutil.which("moto_server")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.2)
    raise SystemExit("moto_server did not start")


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def measure(endpoint: str, n: int, rate: float, seed: int, retries: Retries) -> str:
    proxy = ErringS3(endpoint, rate=rate, seed=seed)
    sweep_dir = SweepDir(
        open_root(f"s3://{BUCKET}/r{time.time_ns()}?endpoint_override={proxy.endpoint}&scheme=http"), "s"
    )
    sweep_dir.create()
    retries.count = 0
    ids = [f"t{i:05d}" for i in range(n)]

    def write():
        for tid in ids:
            write_rows(sweep_dir.trial_part(tid), [{"trial_id": tid, "status": "done", "clean_acc": 0.5}],
                       trial_schema())  # fmt: skip

    _, t_write = _timed(write)
    found, t_scan = _timed(lambda: statuses([sweep_dir.trial_part(t) for t in ids]))
    done, t_compact = _timed(lambda: compaction.compact_table(sweep_dir.trials))
    (file,) = sweep_dir.trials.files(".parquet")
    _, t_back = _timed(lambda: compaction._columns(file, [compaction.PART_COLUMN]))
    trials, t_load = _timed(lambda: analysis.load_trials(sweep_dir.path))
    once = sorted(trials["trial_id"]) == ids and list(found.values()).count("done") == n and done == (n, 1)
    faults = sum(r.fault is not None for r in proxy.log)
    proxy.close()
    return (
        f"rate {rate:.2f}: write {t_write:.1f}s, status scan {t_scan:.1f}s, compact {t_compact:.1f}s (read-back of"
        f" its file {t_back:.2f}s), load {t_load:.1f}s; {len(proxy.log)} requests, {faults} errors injected,"
        f" {retries.count} store retries; every id once: {once}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", type=int, default=200)
    ap.add_argument("--rates", type=float, nargs="+", default=[0.0, 0.2])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    os.environ.update(
        {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}
    )
    retries = Retries()
    logging.getLogger("sweep.store.retry").addHandler(retries)
    logging.getLogger("sweep.store.retry").setLevel(logging.INFO)
    proc, endpoint = _moto()
    try:
        import pyarrow.fs as pafs

        pafs.S3FileSystem(endpoint_override=endpoint, scheme="http", allow_bucket_creation=True).create_dir(BUCKET)
        print(f"{args.parts} one-row trial parts on moto through the erring proxy (seed {args.seed})", flush=True)
        for rate in args.rates:
            print(measure(endpoint, args.parts, rate, args.seed, retries), flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


if __name__ == "__main__":
    main()
