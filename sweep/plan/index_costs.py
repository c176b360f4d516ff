"""What a similarity index's float64 algebra costs, before it runs: each index's work on its matrices, counted
along the paths `sweep.measures.similarity` takes (the same paths `sweep.plan.memory` sizes), in a few kinds of
operation that a cost profile prices from timings on its device (its `algebra` entry, measured by
`sweep.plan.calibration.algebra`):

- `mac`: multiply-adds of float64 matrix products (Grams, covariances, projections, the DM map);
- `decomp`: an eigendecomposition or SVD with its vectors, m p^2 for an m x p matrix (m >= p; n^3 for n x n);
- `values`: singular values or eigenvalues only (`svdvals`, `eigvalsh`), m p^2 likewise;
- `elem`: float64 elements that elementwise passes read (the float32 -> float64 copy, centring, the
  finiteness check, squared sums, resizing);
- `calls`: the fixed cost of one index on small inputs (Python, small kernels, reading a scalar back).

Each registered index names its own count (`Index.work`; an index that names none is priced as the covariance
form, `generic_work`). Torch-free: planning reads it. `tests/benchmarks/index_time.py` times each index on the
shapes of a space's trials against this model (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

from sweep.config.shapes import channels, positions
from sweep.plan.memory import ROW_CHUNK, ShapePair, matrix
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


def _mp2(m: int, p: int) -> float:
    """A decomposition's work on an m x p matrix: the longer side times the shorter one squared."""
    return max(m, p) * min(m, p) ** 2


def _gram(m: int, p: int) -> Work:
    """`centred_gram`: chunks of features to float64, checked, centred, and their m x m product."""
    return Work(mac=m * m * p, elem=4 * m * p)


def _covariances(m: int, pa: int, pb: int) -> Work:
    """`covariances`: chunks of rows to float64, checked, centred, and the three p x p products."""
    return Work(mac=m * (pa * pa + pb * pb + pa * pb), elem=4 * m * (pa + pb))


def rank_work(rows: int, pa: int, pb: int = 0) -> Work:
    """The numerical rank of one side (`pb` unused): its Gram or covariance, and their singular values."""
    small = min(rows, pa)
    return Work(calls=1, mac=small * small * max(rows, pa), elem=4 * rows * pa, values=small**3)


def cka_work(rows: int, pa: int, pb: int) -> Work:
    """Linear CKA: two n x n Grams and their elementwise sums (wide), else the feature-space form's products."""
    if rows < max(pa, pb):
        return Work(calls=1) + _gram(rows, pa) + _gram(rows, pb) + Work(elem=3 * rows * rows)
    return Work(calls=1) + _covariances(rows, pa, pb)  # the same three products


def opd_work(rows: int, pa: int, pb: int) -> Work:
    """OPD: wide, each side's Gram and its eigendecomposition, the n x n cross product, its singular values."""
    one = Work(calls=1)
    if rows < max(pa, pb):
        grams = _gram(rows, pa) + _gram(rows, pb)
        return one + grams + Work(decomp=2 * rows**3, mac=rows**3, values=rows**3, elem=4 * rows * rows)
    if rows > ROW_CHUNK:
        return one + _covariances(rows, pa, pb) + Work(values=_mp2(pa, pb))
    return one + Work(elem=6 * rows * (pa + pb), mac=rows * pa * pb, values=_mp2(pa, pb))


def pwcca_work(rows: int, pa: int, pb: int) -> Work:
    """PWCCA: tall, covariances, each side's eigendecomposition, the whitened cross-covariance's SVD; else each
    side's basis (thin SVDs) and the projections."""
    one = Work(calls=1)
    if rows > ROW_CHUNK:
        cross = Work(decomp=pa**3 + pb**3 + _mp2(pa, pb), mac=pa * pa * pb + pa * pb * pb + 2 * pa**3)
        return one + _covariances(rows, pa, pb) + cross
    ra, rb = min(rows, pa), min(rows, pb)  # the bases' widths, at most
    bases = Work(decomp=_mp2(rows, pa) + _mp2(rows, pb) + _mp2(ra, rb), elem=6 * rows * (pa + pb))
    return one + bases + Work(mac=rows * ra * rb + rows * ra * ra + ra * rows * pa)


def generic_work(rows: int, pa: int, pb: int) -> Work:
    """An index that declares no model of its own: priced as the covariance form (float64 copies, centring and
    the three p x p products)."""
    return Work(calls=1) + _covariances(rows, pa, pb)


WORK = {"cka": cka_work, "opd": opd_work, "pwcca": pwcca_work, "rank": rank_work}  # the shipped indices' counts


def index_work(name: str, rows: int, pa: int, pb: int) -> Work:
    """One shipped index (`cka`, `opd`, `pwcca`, `rank` of one side: `pb` unused) on (rows x pa, rows x pb)."""
    if name not in WORK:
        raise ValueError(f"no work model for index {name!r}; modelled: {sorted(WORK)}")
    return WORK[name](rows, pa, pb)


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


def dm_work(pair: ShapePair, n: int, k: int) -> Work:
    """The DM distance (`_dm_score`): the pseudo-inverse fit on K images' per-position rows, then the test
    images' rows through the map, the sender resized to the target's positions when they differ."""
    rows = positions(pair.target)
    pa, pb = channels(pair.sender), channels(pair.target)
    fit_rows, test_rows = k * rows, n * rows
    # the pseudo-inverse: a thin SVD and V S^-1 U^T; then theta = pinv @ B
    fit = Work(decomp=_mp2(fit_rows, pa + 1), mac=fit_rows * (pa + 1) ** 2 + fit_rows * (pa + 1) * pb)
    resized = 2 * (n + k) * rows * pa if positions(pair.sender) != rows else 0  # interpolation's reads and writes
    test = Work(mac=test_rows * pa * pb, elem=4 * test_rows * (pa + pb) + resized)
    return Work(calls=1) + fit + test


def direct_match_work(pair: ShapePair, k: int) -> Work:
    """Direct matching's own fit (`sweep.stitching.objectives.direct_match`): the normal equations of K images'
    per-position rows accumulated over chunks, their solution and the condition number (decompositions of
    the sender's p x p moment: one eigendecomposition), then a second pass over the rows for the residual."""
    rows = k * positions(pair.target)
    pa, pb = channels(pair.sender), channels(pair.target)
    resized = 2 * rows * pa if positions(pair.sender) != positions(pair.target) else 0
    sums = Work(mac=rows * (pa * pa + pa * pb), elem=4 * rows * (pa + pb) + resized)  # A^T A, A^T B
    return Work(calls=1) + sums + Work(decomp=pa**3, mac=rows * pa * pb, elem=2 * rows * (pa + pb))


def dm_index_work(pair: ShapePair, layout: str, n: int, k: int = 0) -> Work:
    """`dm_work` as an index's work model (its layout is always per-position rows)."""
    return dm_work(pair, n, k)


# The shipped indices' models, named by their `register_index` calls (`sweep.measures.indices`).
cka_index_work, opd_index_work, pwcca_index_work = (on_matrices(f) for f in (cka_work, opd_work, pwcca_work))
rank_index_work = each_side(rank_work)


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
