"""An inversion unit's images on disk: `<results>/inverted/<unit_id>/`, NumPy only (no PyTorch), written by
`sweep.kinds.inversion.run` and read by it, by the similarity units and by the report.

- `shard-00000.npz`, `shard-00001.npz`, ...: `SHARD` images each, in the unit's order: `inverted` in the dtype
  the space chose (`float32`, `float16`, or `uint8`: the pixel value times 255, rounded), and the inversion's
  `loss`, `loss_start` and `best_step` per image. Each is written whole and atomically, so each is a resume
  point: an interrupted unit continues from its first missing shard.
- `index.npz`, written after the last shard: `image` (the targets' indices among the dataset's test images)
  and `seed_image` (the seed images' indices, absent for grey-noise seeds, which the unit's seed redraws): the
  targets and seeds are indices into the dataset, not copies; `dtype`; and the first `PREVIEW` targets, seeds
  and inverted images in 8 bits, what the report draws without reading the dataset or the shards.

Readers load lazily: `index` alone (a similarity unit on natural images), a shard at a time (`shards`), or
the whole inverted set (`inverted`). Results written before shards (`<unit_id>.npz`: `inverted`, `targets`,
`seeds` in float32 and `image`) are still read.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import numpy as np

from sweep.store.layout import INVERTED_INDEX as INDEX
from sweep.store.layout import inverted_folder as folder
from sweep.store.layout import inverted_legacy as legacy
from sweep.store.layout import inverted_shard as shard
from sweep.store.storage import Loc

DTYPES = ("float32", "float16", "uint8")
SHARD = 1000  # images per shard: at 224 px, 150 MB in uint8, 600 MB in float32
PREVIEW = 8  # images of each kind kept in the index for the report


def encode(images: np.ndarray, dtype: str) -> np.ndarray:
    """Images in [0, 1] as stored: uint8 holds round(255 x), the float types the values. Images already in
    `dtype` are returned as they are (a writer may encode batch by batch)."""
    if dtype not in DTYPES:
        raise ValueError(f"inverted images' dtype: one of {DTYPES}, found {dtype!r}")
    if images.dtype == np.dtype(dtype):
        return images
    if dtype == "uint8":
        return np.clip(np.rint(images * 255.0), 0, 255).astype(np.uint8)
    return images.astype(dtype)


def decode(stored: np.ndarray) -> np.ndarray:
    """Stored images as float32 in [0, 1]."""
    if stored.dtype == np.uint8:
        return stored.astype(np.float32) / 255.0
    return stored.astype(np.float32)


def _save(loc: Loc, **arrays) -> None:
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # not compressed: inverted images hardly compress, and a shard reads faster
    loc.write_bytes(buf.getvalue())


def _load(loc: Loc) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(loc.read_bytes())) as npz:
        return {k: npz[k] for k in npz.files}


def write_shard(results: Loc, unit_id: str, k: int, inverted: np.ndarray, dtype: str, **per_image) -> None:
    _save(shard(results, unit_id, k), inverted=encode(inverted, dtype), **per_image)


def write_index(results: Loc, unit_id: str, image, seed_image, dtype: str, targets, seeds, inverted) -> None:
    """The unit's index (last: with it the images are complete). `seed_image`: None for grey-noise seeds;
    `targets`, `seeds`, `inverted`: at least the first PREVIEW images of each."""
    arrays = dict(image=np.asarray(image), dtype=np.array(dtype), preview_targets=encode(targets[:PREVIEW], "uint8"))
    arrays.update(preview_seeds=encode(seeds[:PREVIEW], "uint8"), preview_inverted=encode(inverted[:PREVIEW], "uint8"))
    if seed_image is not None:
        arrays["seed_image"] = np.asarray(seed_image)
    _save(folder(results, unit_id) / INDEX, **arrays)


def has_shard(results: Loc, unit_id: str, k: int) -> bool:
    return shard(results, unit_id, k).exists()


def read_shard(results: Loc, unit_id: str, k: int, as_stored: bool = False) -> dict[str, np.ndarray]:
    """Shard `k`, its images decoded to float32 (`as_stored`: in the dtype they are stored in, for a reader that
    decodes a batch at a time)."""
    arrays = _load(shard(results, unit_id, k))
    return arrays if as_stored else dict(arrays, inverted=decode(arrays["inverted"]))


def index(results: Loc, unit_id: str) -> dict[str, np.ndarray]:
    """The unit's index: `image`, `seed_image` (where the seeds are images), `dtype`, and the `preview_*` images
    (float32); raises FileNotFoundError when the unit has no complete images."""
    loc = folder(results, unit_id) / INDEX
    if loc.exists():
        arrays = _load(loc)
        return {k: decode(v) if k.startswith("preview_") else v for k, v in arrays.items()}
    old = legacy(results, unit_id)
    if old.exists():
        arrays = _load(old)
        out = dict(image=arrays["image"], dtype=np.array("float32"), preview_targets=arrays["targets"][:PREVIEW])
        out["preview_inverted"] = arrays["inverted"][:PREVIEW]
        if "seeds" in arrays:
            out["preview_seeds"] = arrays["seeds"][:PREVIEW]
        return out
    raise FileNotFoundError(f"inversion unit {unit_id} has no images at {folder(results, unit_id)}")


def shards(results: Loc, unit_id: str) -> Iterator[np.ndarray]:
    """The unit's inverted images a shard at a time (float32), in order: one shard in memory at once."""
    n = len(index(results, unit_id)["image"])
    if not (folder(results, unit_id) / INDEX).exists():  # written before shards: one array
        yield decode(_load(legacy(results, unit_id))["inverted"])
        return
    for k in range((n + SHARD - 1) // SHARD):
        yield read_shard(results, unit_id, k)["inverted"]


def inverted(results: Loc, unit_id: str) -> np.ndarray:
    """All of the unit's inverted images (float32, N x C x H x W)."""
    return np.concatenate(list(shards(results, unit_id)))
