"""The memory model's primitives: the bytes a unit's whole-matrix measures hold, before it runs.

An index holds both sides' activations of its images (float32) and a float64 workspace that follows from how
it computes: n x n Grams over chunks of features on wide matrices (`grams_or_copies`), p x p covariances over
chunks of rows on tall ones (more than `ROW_CHUNK` rows: per-position rows), else float64 copies of the whole
matrix (`whole`). Each registered index names its model (`Index.memory`, built from its float64 numbers on
both sides' matrices by `on_matrices`, or of one side by `each_side`); one that names none gets the generic
model of its kind (`generic_numbers`). `ShapePair` is what an index unit compares; `index_need` a unit's
`Need` for its indices. The per-kind needs are in `sweep.planning.memory`. Torch-free: planning reads it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from sweep.config.shapes import channels, positions
from sweep.costs.working import LIVE
from sweep.registry import ARCHITECTURES, DATASETS, INDICES

GiB = 2**30
F32, F64 = 4, 8
FEATURE_CHUNK = 16384  # `centred_gram`'s chunk of features
ROW_CHUNK = 65536  # `matrices.ROWS`
ALLOCATOR = 1.3  # the allocator's own overhead on a workspace, measured (tests/benchmarks/index_memory.py)


def kept(parts: list[int], budget: int) -> int:
    """The bytes the worker cache's memory level keeps of activation parts of `parts` bytes each: a part that
    fits the budget is kept, one that does not is computed per chunk and dropped (`sweep.worker.activations`),
    the kept ones at most the budget in all (it lets the least recently used go)."""
    return min(budget, sum(b for b in parts if b <= budget))


def matrix(shape: tuple[int, ...], layout: str, n: int) -> tuple[int, int]:
    """(rows, columns) of n images' activations of `shape` in `layout` (`similarity.to_2d`)."""
    if len(shape) == 1:
        return n, shape[0]
    if layout == "flatten":
        return n, math.prod(shape)
    if layout == "positions":
        return n * positions(shape), channels(shape)
    return n, channels(shape)  # pooled


def gram_chunk(rows: int, cols: int) -> int:
    # a chunk in float64, centred, the product's packing buffers (BLAS; measured) and its finiteness mask
    return 25 * rows * min(FEATURE_CHUNK, cols) // F64


def whole(rows: int, pa: int, pb: int, copies: int) -> int:
    """Float64 numbers of a whole-matrix form: `copies` of each side, and the p x p products."""
    return copies * rows * (pa + pb) + 2 * (pa * pb + max(pa, pb) ** 2)


def covariances(rows: int, pa: int, pb: int) -> int:
    """Float64 numbers of the p x p covariances accumulated over chunks of rows (`matrices.covariances`)."""
    return 3 * ROW_CHUNK * (pa + pb) + 4 * (pa + pb) ** 2


def grams_or_copies(rows: int, pa: int, pb: int, grams: int, copies: int) -> int:
    """Per-position rows beyond a chunk: p x p covariances over chunks of rows; wide: `grams` n x n matrices
    and a chunk of features; else `copies` of each side."""
    if rows > ROW_CHUNK and rows >= max(pa, pb):
        return covariances(rows, pa, pb)
    wide = rows < max(pa, pb)
    return grams * rows**2 + gram_chunk(rows, max(pa, pb)) if wide else whole(rows, pa, pb, copies)


def generic_numbers(rows: int, pa: int, pb: int) -> int:
    """An index that declares no model of its own: two float64 copies of each side and its p x p products."""
    return whole(rows, pa, pb, 2)


@dataclass(frozen=True)
class ShapePair:
    """What an index unit compares: the sender's and the target's activation shapes on the same images."""

    sender: tuple[int, ...]
    target: tuple[int, ...]
    layouts: dict  # index -> layout (the unit's own, or the registered one)

    def index_bytes(self, name: str, n: int, k: int = 0) -> int:
        """Bytes of registered index `name`'s workspace on n images (and k fit images, for an index that reads
        them): its own model (`Index.memory`), or the generic one of its kind."""
        index = INDICES[name]
        layout = self.layouts.get(name) or index.layout  # the registry's, unless the unit sets one
        model = index.memory or (each_side(generic_numbers) if index.kind == "rank" else on_matrices(generic_numbers))
        return model(self, layout, n, k)

    def held_bytes(self, n: int, k: int = 0, permutations: bool = False) -> int:
        """The float32 activations held: both sides on n images (and k fit images), the target's shuffle."""
        a, b = math.prod(self.sender), math.prod(self.target)
        return F32 * ((n + k) * (a + b) + (n * b if permutations else 0))


def on_matrices(numbers: Callable[[int, int, int], int]) -> Callable[[ShapePair, str, int, int], int]:
    """An index's memory model (`Index.memory`: pair, layout, n, k -> bytes) from its float64 numbers on the
    (rows x pa, rows x pb) matrices of both sides in its layout."""

    def model(pair: ShapePair, layout: str, n: int, k: int = 0) -> int:
        rows, pa = matrix(pair.sender, layout, n)
        work = F64 * numbers(rows, pa, matrix(pair.target, layout, n)[1])
        return int(ALLOCATOR * (work + copies(layout, (pair.sender, pair.target), n)))

    return model


def each_side(numbers: Callable[[int, int, int], int]) -> Callable[[ShapePair, str, int, int], int]:
    """The memory model of an index of one side (a rank): the larger side's workspace, each computed alone."""

    def model(pair: ShapePair, layout: str, n: int, k: int = 0) -> int:
        sides = [(matrix(s, layout, n), s) for s in (pair.sender, pair.target)]
        return int(ALLOCATOR * max(F64 * numbers(r, p, p) + copies(layout, (s,), n) for (r, p), s in sides))

    return model


def copies(layout: str, shapes, n: int) -> int:
    """Bytes of the float32 copies `to_2d` makes: per-position rows of (C, H, W) maps are a permuted copy (a
    flattened or token matrix is a view)."""
    return sum(F32 * n * math.prod(s) for s in shapes if layout == "positions" and len(s) == 3)


@dataclass(frozen=True)
class Need:
    """A unit's memory for its indices: `bytes(n)` for n images, its n now, the field that sets n."""

    kind: str
    label: str
    field: str
    n: int
    bytes_at: Callable[[int], int]
    largest: str  # the index with the largest workspace at n
    instead: str = ""  # the refusal's other way out ("" : drop the index)

    @property
    def bytes(self) -> int:
        return self.bytes_at(self.n)

    def most_images(self, budget: int) -> int:
        """The largest n (at most the unit's) whose need is within `budget` bytes; 0 when none is."""
        lo, hi = 0, self.n
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self.bytes_at(mid) <= budget else (lo, mid - 1)
        return lo


def index_need(
    kind: str, label: str, field: str, n: int, pair: ShapePair, indices, k: int, permutations: bool
) -> Need | None:
    """A unit's need for its `indices` on `pair` (n images, k fit images): both sides' activations held and
    the largest index's workspace; None when no index is sized (those measured after the fit are not)."""
    sized = [i for i in indices if INDICES[i].after_fit is None]  # after the fit: on the stitched network
    if not sized:
        return None
    fit = k if any(INDICES[i].fit_images for i in sized) else 0

    def at(m: int) -> int:
        return pair.held_bytes(m, fit, permutations) + max(pair.index_bytes(i, m, k) for i in sized)

    largest = max(sized, key=lambda i: pair.index_bytes(i, n, k))
    return Need(kind, label, field, n, at, largest)


def gib(n: int) -> str:
    return f"{n / GiB:,.1f} GiB"


def network_sizes(arch: str, dataset: str, points) -> tuple[int, list[int]]:
    """(the largest activation's numbers per image, each point's): graph nodes that are no stitch point count
    as the largest, the input image included."""
    info = DATASETS[dataset]
    shapes = ARCHITECTURES[arch].activation_shapes(info.channels, info.image_size, info.num_classes)
    largest = max([info.channels * info.image_size**2, *(math.prod(v) for v in shapes.values())])
    return largest, [math.prod(shapes[p]) if p in shapes else largest for p in points]


def forward_bytes(largest: int, b: int) -> int:
    """Bytes of one no-grad forward of a batch of b read for Grams: the network's live activations and one
    node's Gram being formed (`centred_gram`: a float64 chunk of features and three b x b products)."""
    return F32 * LIVE * b * largest + F64 * (3 * b * b + gram_chunk(b, largest))
