"""The work model's primitives: what float64 algebra costs, before it runs, counted along the paths the
indices take (the same paths `sweep.costs.memory` sizes), in a few kinds of operation that a cost profile
prices from timings on its device (its `algebra` entry, measured by `sweep.planning.calibration.algebra`):

- `mac`: multiply-adds of float64 matrix products (Grams, covariances, projections, the DM map);
- `decomp`: an eigendecomposition or SVD with its vectors, m p^2 for an m x p matrix (m >= p; n^3 for n x n);
- `values`: singular values or eigenvalues only (`svdvals`, `eigvalsh`), m p^2 likewise;
- `elem`: float64 elements that elementwise passes read (the float32 -> float64 copy, centring, the
  finiteness check, squared sums, resizing);
- `calls`: the fixed cost of one index on small inputs (Python, small kernels, reading a scalar back).

Each registered index names its own count (`Index.work`, built from its count on both sides' matrices by
`on_matrices`, or of one side by `each_side`; an index that names none is priced as the covariance form,
`generic_work`). `pair_work` sums a unit's indices; `direct_match_work` is direct matching's fit. Torch-free:
planning reads it. `tests/sweep/costs/test_work.py` checks each count against what PyTorch dispatches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

from sweep.config.shapes import channels, positions
from sweep.costs.memory import ShapePair, matrix
from sweep.registry import INDICES

RATES = ("mac_s", "decomp_s", "values_s", "elem_s", "calls_s")  # a profile's `algebra`: seconds per operation


@dataclass
class Work:
    """Operations of one computation, by kind (see the module)."""

    mac: float = 0.0
    decomp: float = 0.0
    values: float = 0.0
    elem: float = 0.0
    calls: float = 0.0

    def __add__(self, other: Work) -> Work:
        return Work(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def __mul__(self, k: float) -> Work:
        return Work(*(getattr(self, f.name) * k for f in fields(self)))

    def seconds(self, algebra: dict) -> float:
        """Seconds on the device whose `algebra` timings (a profile's) are given."""
        return sum(getattr(self, f.name) * algebra[f"{f.name}_s"] for f in fields(self))


def mp2(m: int, p: int) -> float:
    """A decomposition's work on an m x p matrix: the longer side times the shorter one squared."""
    return max(m, p) * min(m, p) ** 2


def gram(m: int, p: int) -> Work:
    """`centred_gram`: chunks of features to float64, checked, centred, and their m x m product."""
    return Work(mac=m * m * p, elem=4 * m * p)


def covariances(m: int, pa: int, pb: int) -> Work:
    """`covariances`: chunks of rows to float64, checked, centred, and the three p x p products."""
    return Work(mac=m * (pa * pa + pb * pb + pa * pb), elem=4 * m * (pa + pb))


def generic_work(rows: int, pa: int, pb: int) -> Work:
    """An index that declares no model of its own: priced as the covariance form (float64 copies, centring and
    the three p x p products)."""
    return Work(calls=1) + covariances(rows, pa, pb)


def on_matrices(count: Callable[[int, int, int], Work]) -> Callable[[ShapePair, str, int, int], Work]:
    """An index's work model (`Index.work`: pair, layout, n, k -> Work) from its count on both sides'
    matrices in its layout."""

    def model(pair: ShapePair, layout: str, n: int, k: int = 0) -> Work:
        rows, pa = matrix(pair.sender, layout, n)
        return count(rows, pa, matrix(pair.target, layout, n)[1])

    return model


def each_side(count: Callable[[int, int, int], Work]) -> Callable[[ShapePair, str, int, int], Work]:
    """The work model of an index of one side (a rank): each side on its own."""

    def model(pair: ShapePair, layout: str, n: int, k: int = 0) -> Work:
        sides = [matrix(s, layout, n) for s in (pair.sender, pair.target)]
        return sum((count(rows, p, p) for rows, p in sides), Work())

    return model


def index_work(name: str, rows: int, pa: int, pb: int) -> Work:
    """Registered index `name` on (rows x pa, rows x pb) matrices (a rank: one side, `pb` unused): its count
    (`Index.count`)."""
    count = INDICES[name].count
    if count is None:
        modelled = sorted(n for n, i in INDICES.items() if i.count is not None)
        raise ValueError(f"no work model on matrices for index {name!r}; modelled: {modelled}")
    return count(rows, pa, pb)


def direct_match_work(pair: ShapePair, k: int) -> Work:
    """Direct matching's own fit (`sweep.stitching.objectives.direct_match`): the normal equations of K images'
    per-position rows accumulated over chunks, their solution and the condition number (decompositions of
    the sender's p x p moment: one eigendecomposition), then a second pass over the rows for the residual."""
    rows = k * positions(pair.target)
    pa, pb = channels(pair.sender), channels(pair.target)
    resized = 2 * rows * pa if positions(pair.sender) != positions(pair.target) else 0
    sums = Work(mac=rows * (pa * pa + pa * pb), elem=4 * rows * (pa + pb) + resized)  # A^T A, A^T B
    return Work(calls=1) + sums + Work(decomp=pa**3, mac=rows * pa * pb, elem=2 * rows * (pa + pb))


def pair_work(pair: ShapePair, indices, n: int, k: int, permutations: int = 0) -> Work:
    """The algebra of a unit's `indices` on n images (the fit on k): each registered index's own model
    (`Index.work`), or the generic one of its kind; an index measured after the fit (on the stitched network)
    is left out. A permutation null repeats a similarity or distance `permutations` times."""
    total = Work()
    for name in indices:
        index = INDICES[name]
        if index.after_fit is not None:
            continue
        model = index.work or (each_side(generic_work) if index.kind == "rank" else on_matrices(generic_work))
        work = model(pair, pair.layouts.get(name) or index.layout, n, k)
        repeats = 1 + (permutations if index.kind in ("similarity", "distance") else 0)
        total = total + work * repeats
    return total
