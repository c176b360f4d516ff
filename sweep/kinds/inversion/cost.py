"""What an inversion unit costs before it runs: its seconds (`price`) and the bytes of the inverted images it
writes (`disk`: `Kind.disk`)."""

from __future__ import annotations

from sweep.costs.pricer import Pricer
from sweep.store.inverted import PREVIEW

ITEMSIZE = {"float32": 4, "float16": 2, "uint8": 1}
PER_IMAGE = 8 * 4  # an image's losses and best step in its shard, its indices in the index


def inversion_bytes(unit) -> int:
    """Bytes an inversion unit writes: its images in its dtype, plus the index and its 8-bit previews."""
    from sweep.registry import DATASETS

    info = DATASETS[unit.dataset]
    pixels = info.channels * info.image_size * info.image_size
    return unit.images * (pixels * ITEMSIZE[unit.dtype] + PER_IMAGE) + 3 * PREVIEW * pixels


def disk(unit) -> tuple[str, int]:
    """The line `plan` counts the unit under (its images' size and dtype) and the bytes it writes."""
    from sweep.registry import DATASETS

    return f"{DATASETS[unit.dataset].image_size} px, {unit.dtype}", inversion_bytes(unit)


def price(unit, p: Pricer) -> float:
    """An inversion unit: a forward and a backward through the donor up to its point per step."""
    return p.unit_s + p.step(unit.arch, unit.dataset, unit.images * (unit.steps + 1), upto=unit.point)
