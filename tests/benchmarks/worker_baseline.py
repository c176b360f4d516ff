"""A worker's resident memory after its imports: Ray, torch, torchvision and every registered kind's `run`
module, in a fresh process, as a Ray worker imports them before its first unit. `RUNTIME` in
`sweep/planning/worker_memory.py` is this figure, rounded up (docs/performance.md).

    .venv/bin/python tests/benchmarks/worker_baseline.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = """
import importlib, json
import ray, torch, torchvision  # noqa: F401
from sweep.registry import KINDS
import sweep.worker.cache, sweep.worker.zoo  # noqa: F401
for kind in KINDS.values():
    importlib.import_module(f"sweep.kinds.{kind.name}.run")
status = open("/proc/self/status").read()
print(json.dumps({k: int(status.split(k + ":")[1].split()[0]) // 1024 for k in ("VmRSS", "VmHWM")}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    runs = [json.loads(subprocess.check_output([sys.executable, "-c", CHILD], text=True)) for _ in range(a.runs)]
    for run in runs:
        print(f"after imports: {run['VmRSS']:,} MiB resident (peak {run['VmHWM']:,} MiB)")
    print(f"largest: {max(r['VmRSS'] for r in runs):,} MiB")


if __name__ == "__main__":
    main()
