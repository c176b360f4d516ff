"""How much memory a unit's whole-matrix measures need, before it runs: `stitchsweep plan` prints it, and with
`resources.memory_per_trial` set, a space whose unit would not fit is refused with the number, the field to
change and the largest value of it that fits.

What is sized: the similarity indices of stitching trials (`indices:` on `similarity_samples` test images) and
of representation tests (`samples`; their linear probes on `probe_train_size` training images too). Each
holds both sides' activations of its images (float32) and, per index, a float64 workspace that follows from
how `sweep.measures.similarity` computes it (`cka_numbers`, `opd_numbers`, `pwcca_numbers`, `rank_numbers`,
`dm_bytes`; `svcca_numbers`: the similarity kind's SVCCA): n x n Grams over chunks of features on wide
matrices, p x p covariances over chunks of rows on tall ones (more than 65,536 rows: per-position rows), else
float64 copies of the whole matrix. Each registered index names its model (`Index.memory`); one that names
none gets the generic model of its kind (two float64 copies of each side and the p x p products; a rank
index, each side alone). Each kind of work names its units' need (`Kind.memory`).

The CKA units of the similarity kinds (`similarity`, `training_similarity`) are sized too: the minibatch
estimator holds one batch's live activations of one network (`LIVE` of its largest activation, measured), a
node's Gram being formed, and the stacked batch x batch Grams of every point (float64; `training_similarity`:
of every kept epoch); the full estimator holds every point's activations of all its images and the CKA of one
pair, or where every point has fewer features than there are images, only the feature-space products it
accumulates (`cka_streams`). A t-SNE unit holds every point's activations of its images. Graph nodes
(`points: modules`) are counted at the network's largest activation, an upper bound.

The activations are counted once per side (a worker's activation cache holds them anyway); the models, the
data and the runtime come on top (about 1-2 GB on a CPU worker). `tests/benchmarks/index_memory.py` measures
each index's peak against this model (docs/performance.md). Torch-free: planning reads it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from sweep.config.shapes import activation_shape, channels, positions
from sweep.measures.full_cka import CKA_BATCH, cka_streams, streamed_products
from sweep.registry import ARCHITECTURES, DATASETS, INDICES

GiB = 2**30
F32, F64 = 4, 8
FEATURE_CHUNK = 16384  # `centred_gram`'s chunk of features
ROW_CHUNK = 65536  # `similarity.ROWS`
ALLOCATOR = 1.3  # the allocator's own overhead on a workspace, measured (tests/benchmarks/index_memory.py)
LIVE = 4  # a network's live float32 activations in a no-grad forward, in its largest activation (measured)


def matrix(shape: tuple[int, ...], layout: str, n: int) -> tuple[int, int]:
    """(rows, columns) of n images' activations of `shape` in `layout` (`similarity.to_2d`)."""
    if len(shape) == 1:
        return n, shape[0]
    if layout == "flatten":
        return n, math.prod(shape)
    if layout == "positions":
        return n * positions(shape), channels(shape)
    return n, channels(shape)  # pooled


def _gram_chunk(rows: int, cols: int) -> int:
    # a chunk in float64, centred, the product's packing buffers (BLAS; measured) and its finiteness mask
    return 25 * rows * min(FEATURE_CHUNK, cols) // F64


def _whole(rows: int, pa: int, pb: int, copies: int) -> int:
    """Float64 numbers of a whole-matrix form: `copies` of each side, and the p x p products."""
    return copies * rows * (pa + pb) + 2 * (pa * pb + max(pa, pb) ** 2)


def _covariances(rows: int, pa: int, pb: int) -> int:
    return 3 * ROW_CHUNK * (pa + pb) + 4 * (pa + pb) ** 2


def _grams_or_copies(rows: int, pa: int, pb: int, grams: int, copies: int) -> int:
    """Per-position rows beyond a chunk: p x p covariances over chunks of rows; wide: `grams` n x n matrices
    and a chunk of features; else `copies` of each side."""
    if rows > ROW_CHUNK and rows >= max(pa, pb):
        return _covariances(rows, pa, pb)
    wide = rows < max(pa, pb)
    return grams * rows**2 + _gram_chunk(rows, max(pa, pb)) if wide else _whole(rows, pa, pb, copies)


def cka_numbers(rows: int, pa: int, pb: int) -> int:
    """Linear CKA: 3 n x n Grams (wide), covariances (tall), else 2 copies of each side."""
    return _grams_or_copies(rows, pa, pb, 3, 2)


def opd_numbers(rows: int, pa: int, pb: int) -> int:
    """The orthogonal Procrustes distance: as CKA, with 7 n x n matrices (its eigendecompositions), 3 copies."""
    return _grams_or_copies(rows, pa, pb, 7, 3)


def pwcca_numbers(rows: int, pa: int, pb: int) -> int:
    """PWCCA: covariances on tall matrices, else 6 float64 copies per side and its bases."""
    if rows > ROW_CHUNK and rows >= max(pa, pb):
        return _covariances(rows, pa, pb)
    return _whole(rows, pa, pb, 6) + 2 * rows * min(rows, pa)


def svcca_numbers(rows: int, pa: int, pb: int) -> int:
    """SVCCA: each side's thin SVD (3 copies), then CCA on at most min(rows, p) directions: never p x p."""
    return 3 * rows * (pa + pb) + _whole(rows, min(rows, pa), min(rows, pb), 6)


def rank_numbers(rows: int, pa: int, pb: int) -> int:
    """The numerical rank of one side (`pb` unused): Grams when wide, covariances over chunks of rows."""
    return 3 * rows**2 + _gram_chunk(rows, pa) if rows < pa else 3 * min(rows, ROW_CHUNK) * pa + 2 * pa * pa


def generic_numbers(rows: int, pa: int, pb: int) -> int:
    """An index that declares no model of its own: two float64 copies of each side and its p x p products."""
    return _whole(rows, pa, pb, 2)


# The shipped measures' numbers by name (each index names its model, `Index.memory`, built from these; the
# benchmarks read them).
NUMBERS = {"cka": cka_numbers, "opd": opd_numbers, "pwcca": pwcca_numbers, "svcca": svcca_numbers, "rank": rank_numbers}


def dm_numbers(fit_rows: int, test_rows: int, pa: int, pb: int) -> int:
    """The DM distance: the pseudo-inverse fit on K images' rows (4 copies of [A 1] and B), then the test
    rows in chunks."""
    return 4 * fit_rows * (pa + 1 + pb) + 3 * min(test_rows, ROW_CHUNK) * (pa + pb) + 2 * (pa + 1) * pb


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
        return int(ALLOCATOR * (work + _copies(layout, (pair.sender, pair.target), n)))

    return model


def each_side(numbers: Callable[[int, int, int], int]) -> Callable[[ShapePair, str, int, int], int]:
    """The memory model of an index of one side (a rank): the larger side's workspace, each computed alone."""

    def model(pair: ShapePair, layout: str, n: int, k: int = 0) -> int:
        sides = [(matrix(s, layout, n), s) for s in (pair.sender, pair.target)]
        return int(ALLOCATOR * max(F64 * numbers(r, p, p) + _copies(layout, (s,), n) for (r, p), s in sides))

    return model


def dm_bytes(pair: ShapePair, layout: str, n: int, k: int = 0) -> int:
    """The DM distance over the target's positions, the sender resized to them: its fit on k images, its test
    images by batches of about ROW_CHUNK rows (`dm_numbers`)."""
    rows, pb = matrix(pair.target, "positions", 1)
    batch = min(n, max(1, ROW_CHUNK // rows))
    resized = k + batch if positions(pair.sender) != rows else 0  # resized senders: the fit's, a batch's
    work = F64 * dm_numbers(k * rows, n * rows, channels(pair.sender), pb)
    work += F32 * resized * rows * channels(pair.sender)
    return int(ALLOCATOR * (work + _copies("positions", (pair.target,), k + batch)))


# The shipped indices' models, named by their `register_index` calls (`sweep.measures.indices`).
cka_bytes, opd_bytes, pwcca_bytes, svcca_bytes = (
    on_matrices(f) for f in (cka_numbers, opd_numbers, pwcca_numbers, svcca_numbers)
)
rank_bytes = each_side(rank_numbers)


def _copies(layout: str, shapes, n: int) -> int:
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


def _need(
    kind: str, label: str, field: str, n: int, pair: ShapePair, indices, k: int, permutations: bool
) -> Need | None:
    sized = [i for i in indices if INDICES[i].after_fit is None]  # after the fit: on the stitched network
    if not sized:
        return None
    fit = k if any(INDICES[i].fit_images for i in sized) else 0

    def at(m: int) -> int:
        return pair.held_bytes(m, fit, permutations) + max(pair.index_bytes(i, m, k) for i in sized)

    largest = max(sized, key=lambda i: pair.index_bytes(i, n, k))
    return Need(kind, label, field, n, at, largest)


def trial_need(spec, sweep) -> Need | None:
    """A stitching trial's need, or None when it measures no sized index (a noise sender's indices are
    measured after the fit, on sampled features)."""
    front, end = (sweep.donors.get(ref.partition(":")[2]) for ref in (spec.front, spec.end))  # refs: "zoo:NAME"
    if not spec.indices or front is None or end is None or not front.network:
        return None
    pair = ShapePair(
        activation_shape(front.arch, spec.dataset, spec.front_point),
        activation_shape(end.arch, spec.dataset, spec.end_point),
        {"pwcca": spec.pwcca_layout, "opd": spec.opd_layout},
    )
    n, k = spec.similarity_samples, spec.dm_samples or 0
    return _need("trial", spec.label, "similarity_samples", n, pair, spec.indices, k, bool(spec.permutations))


def reptest_need(spec, sweep=None) -> Need | None:
    """A representation test's need: its largest pair of members (they share one architecture), or its linear
    probes where they hold more (each member's features of `probe_train_size` training and `samples` test
    images, their standardised copies and a temporary: `sweep.measures.probing`)."""
    shapes = {activation_shape(spec.arch, spec.dataset, layer) for _, _, layer, _ in spec.members}
    needs = [
        _need("reptest", spec.label, "samples", spec.samples, ShapePair(a, b, {}), spec.indices, spec.dm_samples, False)
        for a in shapes
        for b in shapes
    ]
    widest = max(math.prod(s) for s in shapes)

    def probe(m: int) -> int:
        return int(ALLOCATOR * 3 * F32 * (m + spec.samples) * widest)

    needs.append(
        Need("reptest", spec.label, "probe_train_size", spec.probe_train_size, probe, "probe", "or lower samples")
    )
    return max((x for x in needs if x), key=lambda x: x.bytes)


def embedding_need(spec, sweep=None) -> Need:
    """A t-SNE unit: every point's activations of its images (float32), and scikit-learn's float64 copy and
    PCA initialisation of one point's (3 copies), after a forward of 250 images at a time."""
    largest, sizes = _network(spec.arch, spec.dataset, spec.points)

    def at(n: int) -> int:
        forward = F32 * LIVE * min(n, CKA_BATCH) * largest
        return int(ALLOCATOR * (forward + F32 * n * sum(sizes) + 3 * F64 * n * max(sizes)))

    return Need("tsne", spec.label, "images", spec.images, at, "t-SNE", "or embed fewer points")


def _network(arch: str, dataset: str, points) -> tuple[int, list[int]]:
    """(the largest activation's numbers per image, each point's): graph nodes that are no stitch point count
    as the largest, the input image included."""
    info = DATASETS[dataset]
    shapes = ARCHITECTURES[arch].activation_shapes(info.channels, info.image_size, info.num_classes)
    largest = max([info.channels * info.image_size**2, *(math.prod(v) for v in shapes.values())])
    return largest, [math.prod(shapes[p]) if p in shapes else largest for p in points]


def _forward(largest: int, b: int) -> int:
    """Bytes of one no-grad forward of a batch of b read for Grams: the network's live activations and one
    node's Gram being formed (`centred_gram`: a float64 chunk of features and three b x b products)."""
    return F32 * LIVE * b * largest + F64 * (3 * b * b + _gram_chunk(b, largest))


def similarity_need(spec, sweep=None) -> Need | None:
    """A similarity unit's CKA (minibatch on `batch_size` images at a time, or full on all `images`), or its
    pairwise index, OPD, SVCCA or a plugin's (every point's activations held, and the widest pair's workspace:
    the index's own model, `Index.memory`, else the generic one). Saliency: none."""
    by = INDICES[spec.measure].similarity_by
    if by == "saliency":
        return None
    big_a, sizes_a = _network(spec.a_arch, spec.dataset, spec.a_points)
    big_b, sizes_b = _network(spec.b_arch, spec.dataset, spec.b_points)
    same = spec.a_key == spec.b_key and spec.a_points == spec.b_points and spec.a_inputs == spec.b_inputs
    if spec.estimator == "minibatch":  # A's stacked Grams held while B's list is stacked (B is A when same)
        grams = 2 * len(sizes_a) if same else len(sizes_a) + 2 * len(sizes_b)

        def at(b: int) -> int:
            return int(ALLOCATOR * (F64 * grams * b * b + _forward(max(big_a, big_b), b)))

        label, instead = f"{spec.label} (minibatch CKA)", "or read fewer points"
        return Need("similarity", label, "batch_size", spec.batch_size, at, "cka", instead)

    def whole(n: int) -> int:  # a forward of a batch, and the products or every point's activations held
        forward = int(ALLOCATOR * F32 * LIVE * min(n, CKA_BATCH) * max(big_a, big_b))
        if by == "pairwise":
            pair = ShapePair((max(sizes_a),), (max(sizes_b),), {spec.measure: "flatten"})
            held = pair.index_bytes(spec.measure, n)
            return forward + F32 * n * (sum(sizes_a) + sum(sizes_b)) + held
        if cka_streams(n, sizes_a, sizes_b):
            return forward + int(ALLOCATOR * F64 * streamed_products(sizes_a, sizes_b))
        pair = ShapePair((max(sizes_a),), (max(sizes_b),), {})
        return forward + F32 * n * (sum(sizes_a) + sum(sizes_b)) + cka_bytes(pair, "flatten", n)

    if by == "pairwise":
        return Need("similarity", spec.label, "images", spec.images, whole, spec.measure, "or read fewer points")
    label, instead = f"{spec.label} (full CKA)", "or use estimator: minibatch"
    return Need("similarity", label, "images", spec.images, whole, "cka", instead)


def training_similarity_need(spec, sweep=None) -> Need:
    """CKA across epochs: per batch, the Grams of every kept epoch at every point (and one point's stacked over
    the epochs), one model's forward at a time."""
    largest, _ = _network(spec.arch, spec.dataset, spec.points)
    grams = len(spec.epochs) * (len(spec.points) + 1)

    def at(b: int) -> int:
        return int(ALLOCATOR * (F64 * grams * b * b + _forward(largest, b)))

    return Need("training_similarity", spec.label, "batch_size", spec.batch_size, at, "cka", "or keep fewer epochs")


def needs(sweep) -> list[Need]:
    """Every sized unit's need (each kind's `Kind.memory`), kind by kind in registration order."""
    from sweep.registry import KINDS, resolve

    out = []
    for kind in KINDS.values():
        if kind.memory is not None and kind.section is not None:
            need = resolve(kind.memory)
            out += [need(unit, sweep) for unit in sweep.units.get(kind.name, ())]
    return [x for x in out if x]


def gib(n: int) -> str:
    return f"{n / GiB:,.1f} GiB"


def plan_lines(sweep) -> list[str]:
    """`plan`'s memory lines: the largest need of each kind, against `resources.memory_per_trial` if set."""
    by_kind: dict[str, Need] = {}
    for need in needs(sweep):
        if need.kind not in by_kind or need.bytes > by_kind[need.kind].bytes:
            by_kind[need.kind] = need
    return [
        f"memory: the largest {need.kind} unit's measures need {gib(need.bytes)} ({need.largest} on"
        f" {need.field} = {need.n:,}: {need.label})"
        for need in by_kind.values()
    ]


def check(sweep) -> None:
    """Refuse a space whose unit's indices need more than `resources.memory_per_trial` (when it is set)."""
    from sweep.config.errors import SpecError

    budget = getattr(sweep, "memory_per_trial", None)
    if not budget:
        return
    limit = int(budget * GiB)
    over = [need for need in needs(sweep) if need.bytes > limit]
    if over:
        need = max(over, key=lambda x: x.bytes)
        fits = min(x.most_images(limit) for x in over if x.field == need.field)
        instead = need.instead or f"or drop {need.largest}"
        raise SpecError(
            "resources.memory_per_trial",
            f"room for every unit's indices: {need.label} needs {gib(need.bytes)} ({need.largest} on"
            f" {need.field} = {need.n:,})",
            budget,
            f"lower {need.field} to {fits:,} or fewer, raise memory_per_trial, {instead}"
            if fits
            else f"raise memory_per_trial, {instead}",
        )
