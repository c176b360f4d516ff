"""Print (or, with --write, store) the table of the built-in architectures that `sweep.models.declared` reads
so that checking a search space builds no network: each one's stitch points, its points, and its activation
shapes on the input of every registered dataset (channels x image size x classes) it accepts.

`tests/sweep/test_registry_declared.py` rebuilds the networks and compares them with `sweep/models/table.json`, so a
change to a network that moves a point or a shape fails a test until this is run again:

    .venv/bin/python tests/scripts/architectures.py --write
"""

from __future__ import annotations

import json
import sys
import time

from sweep.models.declared import BUILTIN, TABLE, shapes_key


def inputs() -> list[tuple[int, int, int]]:
    """Every (channels, image size, classes) of a registered dataset, sorted."""
    from sweep.registry import DATASETS

    return sorted({(d.channels, d.image_size, d.num_classes) for d in DATASETS.values()})


def row(arch: str, triples) -> dict:
    from sweep.models.base import measure_points, measure_shapes

    shapes = {}
    for c, s, k in triples:
        try:
            shapes[shapes_key(c, s, k)] = {p: list(v) for p, v in measure_shapes(arch, c, s, k).items()}
        except (ValueError, RuntimeError):  # an input this network does not take (a ViT's patch size)
            continue
    return {
        "stitch_points": list(measure_points(arch)),
        "points": list(measure_points(arch, extra=True)),
        "shapes": shapes,
    }


def main() -> None:
    import torch

    torch.set_grad_enabled(False)
    triples = inputs()
    table = {}
    for arch in BUILTIN:
        t0 = time.perf_counter()
        table[arch] = row(arch, triples)
        print(f"{arch}: {len(table[arch]['shapes'])} inputs, {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    text = json.dumps(table, indent=1, sort_keys=True) + "\n"
    if "--write" in sys.argv:
        TABLE.write_text(text)
        print(f"wrote {TABLE}", file=sys.stderr)
    else:
        print(text)


if __name__ == "__main__":
    main()
