"""Print (or, with --write, store) the numbers each built-in architecture holds (parameters and buffers) on
the input of every registered dataset it accepts: `sweep/planning/networks.json`, which `stitchsweep plan`
reads to size a unit's donors without building a network (`sweep.planning.worker_memory`). Built on PyTorch's
meta device: nothing is allocated. `tests/sweep/planning/test_worker_memory.py` rebuilds a small one and
compares, so run this again after a change to a network:

    .venv/bin/python tests/scripts/network_numbers.py --write
"""

from __future__ import annotations

import json
import sys

from sweep.models.declared import BUILTIN, table
from sweep.planning.worker_memory import NETWORKS


def numbers(arch: str, key: str) -> int:
    """Parameters and buffers (floating point ones) of `arch` on input `key` ("CxSxK")."""
    import torch

    from sweep.models.base import build

    c, s, k = (int(x) for x in key.split("x"))
    with torch.device("meta"):
        net = build(arch, in_channels=c, num_classes=k, mean=(0.5,) * c, std=(0.5,) * c, image_size=s)
    tensors = [*net.parameters(), *net.buffers()]
    return sum(t.numel() for t in tensors if t.is_floating_point())


def main() -> None:
    rows = {arch: {key: numbers(arch, key) for key in sorted(table()[arch]["shapes"])} for arch in sorted(BUILTIN)}
    text = json.dumps(rows, indent=1, sort_keys=True) + "\n"
    if "--write" in sys.argv:
        NETWORKS.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
