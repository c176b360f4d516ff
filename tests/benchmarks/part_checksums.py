"""What the parts' checksums cost (`sweep.store.checksum`): writing and reading many one-row parts with and
without them.

N one-row trial parts (the trials schema, 115 columns, a typical configuration row; default 2,000) in a local
folder, each step timed `--repeats` times (the best is reported, with the median):

- serialising a part: `pq.write_table` as before checksums, against `parquet_bytes` (page CRCs and the SHA-256);
- writing the N parts through the store's atomic writer (`Loc.write_parquet`, checksums included);
- reading each part whole: as before checksums (`pq.ParquetFile` on the open file, no verification), read
  whole without verification, and `Loc.read_parquet` (verified: the SHA-256 and the page CRCs);
- the planner's status read of each part (the `status` column), before and now;
- `analysis.load_trials` of the folder, verification off (patched out) and on;
- the same after compaction (a file per 1,000 parts), off and on.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/part_checksums.py [--parts 2000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import analysis  # noqa: E402
from sweep.store import compact, storage  # noqa: E402
from sweep.store.checksum import parquet_bytes  # noqa: E402
from sweep.store.results import read_status  # noqa: E402
from sweep.store.schema import trial_schema  # noqa: E402
from sweep.store.storage import open_root  # noqa: E402


def _row(i: int) -> dict:
    return {
        "trial_id": f"t{i:06d}", "status": "done", "sweep": "bench", "front": "zoo:a", "end": "zoo:b",
        "objective": "dm", "front_point": "layer1.0", "end_point": "layer1.0", "point_index": 1, "end_index": 1,
        "seed": i % 5, "clean_acc": 0.5 + i / 1e5, "robust_acc": 0.1, "relative_acc": 0.9, "epochs": 1,
        "lr": 0.01, "time_total_s": 1.5,
    }  # fmt: skip


def _timed(fn, repeats: int) -> tuple[float, float]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def _old_read(loc) -> pa.Table:  # the store's reader before checksums: footer, then the columns
    with loc.fs.open_input_file(loc.path) as fh:
        return pq.ParquetFile(fh).read()


def _old_status(loc) -> str:
    with loc.fs.open_input_file(loc.path) as fh:
        return pq.ParquetFile(fh).read(columns=["status"])["status"][0].as_py()


@contextmanager
def _unverified():
    real = storage.verified
    storage.verified = lambda data, where: pq.ParquetFile(pa.BufferReader(data))
    try:
        yield
    finally:
        storage.verified = real


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    n, r = args.parts, args.repeats
    tables = [pa.Table.from_pylist([_row(i)], schema=trial_schema()) for i in range(n)]
    out = []

    def plain_bytes(t: pa.Table) -> bytes:
        sink = pa.BufferOutputStream()
        pq.write_table(t, sink)
        return sink.getvalue().to_pybytes()

    out.append(("serialise N parts, before (pq.write_table)", _timed(lambda: [plain_bytes(t) for t in tables], r)))
    out.append(("serialise N parts, with checksums", _timed(lambda: [parquet_bytes(t) for t in tables], r)))
    with tempfile.TemporaryDirectory() as tmp:
        root = open_root(Path(tmp) / "bench")
        folder = root / "trials"
        parts = [folder / f"t{i:06d}.parquet" for i in range(n)]
        write = lambda: [p.write_parquet(t) for p, t in zip(parts, tables)]  # noqa: E731
        out.append(("write N parts (Loc.write_parquet)", _timed(write, r)))
        print(f"{n} parts of {parts[0].fs.get_file_info(parts[0].path).size:,} bytes each", flush=True)
        out.append(("read N parts, before (open file, no checks)", _timed(lambda: [_old_read(p) for p in parts], r)))
        with _unverified():
            out.append(("read N parts whole, no checks", _timed(lambda: [p.read_parquet() for p in parts], r)))
        out.append(("read N parts, verified (Loc.read_parquet)", _timed(lambda: [p.read_parquet() for p in parts], r)))
        out.append(("status of N parts, before", _timed(lambda: [_old_status(p) for p in parts], r)))
        out.append(("status of N parts, verified (read_status)", _timed(lambda: [read_status(p) for p in parts], r)))
        with _unverified():
            out.append(("analysis.load_trials, no checks", _timed(lambda: analysis.load_trials(root), r)))
        out.append(("analysis.load_trials, verified", _timed(lambda: analysis.load_trials(root), r)))
        compact.compact(root)
        files = folder.files(".parquet")
        size = sum(f.fs.get_file_info(f.path).size for f in files)
        print(f"compacted: {len(files)} file(s) of {size:,} bytes in all", flush=True)
        with _unverified():
            out.append(("analysis.load_trials compacted, no checks", _timed(lambda: analysis.load_trials(root), r)))
        out.append(("analysis.load_trials compacted, verified", _timed(lambda: analysis.load_trials(root), r)))
    print(f"{'step (N = ' + format(n, ',') + ')':48s} {'best':>9s} {'median':>9s} {'per part':>10s}")
    for name, (best, median) in out:
        print(f"{name:48s} {best:8.2f}s {median:8.2f}s {best / n * 1e3:8.3f}ms")


if __name__ == "__main__":
    main()
