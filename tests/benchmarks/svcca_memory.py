"""SVCCA's peak host memory on wide matrices (more features than images, as early layers are) against the
planner's model (`INDICES["svcca"].numbers(...)`, `sweep.measures.indices.svcca`), one process per size.

    .venv/bin/python tests/benchmarks/svcca_memory.py 500 40000
    .venv/bin/python tests/benchmarks/svcca_memory.py 1000 60000
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from sweep.costs.memory import F64  # noqa: E402
from sweep.measures.indices.svcca import svcca  # noqa: E402
from sweep.registry import INDICES  # noqa: E402


def main() -> None:
    n, p = int(sys.argv[1]), int(sys.argv[2])
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, p, generator=g), torch.randn(n, p, generator=g)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    value = svcca(a, b)
    measured = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
    model = F64 * INDICES["svcca"].numbers(n, p, p) / 2**20
    print(f"{n} x {p} per side: SVCCA {value:.4f}; peak above the inputs {measured:,.0f} MB, model {model:,.0f} MB")


if __name__ == "__main__":
    main()
