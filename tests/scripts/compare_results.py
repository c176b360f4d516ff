"""Compare two results folders of one sweep, table by table: the rows of every Parquet table (every column both
record, but timings, host, device, time and the worker that ran it) and the stitchers' saved weights byte for
byte. For checking that a change of the engine leaves results unchanged: run the same space from two checkouts
into two storages, then

    PYTHONPATH=. .venv/bin/python tests/scripts/compare_results.py RESULTS_A/SWEEP RESULTS_B/SWEEP

Reads the parts as files (loose or compacted, the snapshot left out), not through a release's reader, so two
releases whose layouts differ compare alike. Exits 1 when anything differs.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

NOT_COMPARED = {"hostname", "device", "finished_at", "started_at", "worker_pid", "worker_node", "_part"}
KEYS = ("trial_id", "unit_id", "donor_key")


def rows(sweep: Path, table: str) -> pd.DataFrame | None:
    """Every row of a table's Parquet files (loose parts and compacted files; not the snapshot)."""
    files = [p for p in (sweep / table).rglob("*.parquet") if not any(s.startswith("_") for s in p.parts[-2:-1])]
    if not files:
        return None
    return pd.concat([pq.read_table(f).to_pandas() for f in sorted(files)], ignore_index=True)


def compared(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The columns compared, sorted by the table's key (and epoch/step of a curve)."""
    order = [c for c in (*KEYS, "epoch", "step", "image", "index") if c in columns] or columns[:1]
    return frame[columns].sort_values(order, kind="stable").reset_index(drop=True)


def compare_table(a: Path, b: Path, table: str) -> bool:
    ta, tb = rows(a, table), rows(b, table)
    if ta is None and tb is None:
        return True  # a kind this space has no units of
    if ta is None or tb is None:
        print(f"{table}: rows on one side only ({0 if ta is None else len(ta)} and {0 if tb is None else len(tb)})")
        return False
    cols = [
        c for c in ta.columns if c in tb.columns and c not in NOT_COMPARED and not c.startswith("time_")
        and not c.endswith("_s")
    ]  # fmt: skip
    sa, sb = compared(ta, cols), compared(tb, cols)
    same = len(sa) == len(sb) and sa.equals(sb)
    diff = [c for c in cols if len(sa) == len(sb) and not sa[c].equals(sb[c])]
    print(f"{table}: {len(ta)} and {len(tb)} rows, {len(cols)} columns compared: {'equal' if same else 'DIFFER'}"
          + (f" ({', '.join(diff)})" if diff else ""))  # fmt: skip
    return same


def digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*.pt")}


def main(argv: list[str]) -> int:
    a, b = Path(argv[0]), Path(argv[1])
    tables = sorted(
        {p.name for p in (*a.iterdir(), *b.iterdir()) if p.is_dir() and not p.name.startswith("_")} - {"stitchers"}
    )
    ok = all([compare_table(a, b, t) for t in tables])
    da, db = digests(a / "stitchers"), digests(b / "stitchers")
    print(f"stitchers: {len(da)} and {len(db)} files: {'byte-identical' if da == db else 'DIFFER'}")
    ok &= da == db
    print("equal" if ok else "different")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
