"""What a similarity index is to the engine: the pair of activations it sees (`Pair`), the stitched network an
index measured after the fit sees (`Network`), the registered entry (`Index`: its torch-free catalogue entry,
`sweep.store.catalogue`, with how the engine computes it and what planning charges it) and `register_index`.
The shipped indices are each one module of this package; `sweep.measures.indices` re-exports these names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

from sweep.costs import memory as memory_model
from sweep.costs import work as work_model
from sweep.registry import INDICES, lazy
from sweep.store.catalogue import INDEX_CATALOGUE, IndexEntry, add_entry

# The shared math (`similarity.py`, PyTorch) is imported the first time an index is computed: reading the
# registry, as checking a space does, imports no PyTorch.
to_2d = lazy("sweep.measures.similarity:to_2d")


@dataclass
class Pair:
    """What an index sees of a (sender, target) pair: the activations of the same test images, as each model
    produced them (any shape; the index's layout makes them 2-D). In a stitching trial the sender is f<=i and
    the target g<=j; in a representation test the sender is the member B and the target the reference A.

    `resize`: the sender's maps at the target's spatial size, as the stitcher sees them (for direct matching).
    `fit`: the same pair on the K training images, computed only when an index asks (the DM distance).
    `layouts`: per-index layouts that override the registered ones (a trial's `layouts:` for PWCCA and OPD).
    `options`: the indices' options a trial sets, option name -> value (`Index.options`: `mknn_k`); an index
    binds those it takes, the rest keep their defaults."""

    sender: torch.Tensor
    target: torch.Tensor
    resize: Callable[[torch.Tensor], torch.Tensor] = lambda a: a
    fit: Callable[[], tuple[torch.Tensor, torch.Tensor]] | None = None
    layouts: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    _fitted: tuple | None = field(default=None, repr=False)

    def fit_pair(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._fitted is None:
            if self.fit is None:
                raise ValueError("this index needs the pair's activations on the fit images, and none were given")
            self._fitted = self.fit()
        return self._fitted


def _on_pair(fn: Callable) -> Callable[[Pair, str], float]:
    """The usual score: `fn(A, B)` of the sender's and the target's activations in `layout`."""

    def score(pair: Pair, layout: str) -> float:
        return fn(to_2d(pair.sender, layout), to_2d(pair.target, layout))

    return score


@dataclass
class Network:
    """What an index measured after the fit sees: the stitched sender T(f<=i(.)), the end model's own front
    g<=j, the receiver g>j, and the images (the first `similarity_samples` test images; for a noise sender, its
    test samples, the end's front seeing the images `x_end`)."""

    stitched_sender: Callable[[torch.Tensor], torch.Tensor]
    end_front: torch.nn.Module
    end: torch.nn.Module
    x: torch.Tensor
    device: torch.device
    x_end: torch.Tensor | None = None  # what the end's own front sees, when not `x` (a noise sender's samples)


@dataclass(frozen=True)
class Index:
    """A similarity index a search space may request (`indices:`): its catalogue entry (name, columns,
    direction; torch-free, in `sweep.store.catalogue`) and how the engine computes it."""

    entry: IndexEntry
    fn: Callable  # the pure function on 2-D arrays (a rank index: on one side)
    layout: str  # how activations become 2-D (`to_2d`) unless the pair overrides it
    score: Callable[[Pair, str], float] | None = None  # default: fn(sender, target) in the layout
    symmetric: bool = True
    # an index of the stitched network, measured after the fit: its columns from the `Network`
    after_fit: Callable[[Network], dict] | None = None
    # representation tests: Ding et al. score d(A, B) with A, the reference (the pair's target), first
    target_first_in_reptests: bool = False
    # What planning charges it, before it runs (torch-free): `memory(pair, layout, n, k)`, the bytes of its
    # workspace on n images of a `sweep.costs.memory.ShapePair` (k: the fit images); `work(pair, layout, n, k)`,
    # its float64 algebra (`sweep.costs.work.Work`). None: the generic model of its kind (two float64 copies of
    # each side and the p x p products; priced as the covariance form). `numbers(rows, pa, pb)` and
    # `count(rows, pa, pb)`: the same on both sides' (rows x pa, rows x pb) matrices (a rank: one side, `pb`
    # unused), where the index has such a form (`memory` and `work` are then built from them).
    memory: Callable | None = None
    work: Callable | None = None
    numbers: Callable[[int, int, int], int] | None = None
    count: Callable[[int, int, int], object] | None = None
    fit_images: bool = False  # it reads the pair's fit images too (the DM distance): they are held with the rest
    # Scope "similarity" (a `similarity:` entry's `measure`): how the similarity kind computes it. "pairwise":
    # `fn(a, b, **options)` on every pair of points' whole (images x features) matrices, returning the value or
    # (value, further columns); "cka": the kind's streamed / minibatch CKA; "saliency": its input-gradient cosine.
    similarity_by: str = "pairwise"
    # the options it takes: option name -> `fn`'s keyword (SVCCA: svcca_max_k -> max_k, a similarity entry's;
    # mutual k-NN: mknn_k -> k, a similarity entry's and a stitching block's); unset (None), `fn`'s default
    options: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.entry.index

    @property
    def scopes(self) -> tuple[str, ...]:
        return self.entry.scopes

    @property
    def kind(self) -> str:
        return self.entry.kind

    @property
    def columns(self) -> tuple[str, ...]:
        return self.entry.columns

    @property
    def larger_is_more_similar(self) -> bool | None:
        return self.entry.larger_is_more_similar

    @property
    def description(self) -> str:
        return self.entry.description

    def bound(self, options: dict) -> Callable:
        """`fn` with the options it takes from `options` (option name -> value; None: unset) bound."""
        kw = {k: options[o] for o, k in self.options.items() if options.get(o) is not None}
        return partial(self.fn, **kw) if kw else self.fn

    def _scorer(self, pair: Pair) -> Callable[[Pair, str], float]:
        return self.score or _on_pair(self.bound(pair.options))

    def values(self, pair: Pair) -> dict:
        """The trials columns of this index on `pair`."""
        layout = pair.layouts.get(self.name) or self.layout
        if self.kind == "rank":
            return dict(zip(self.columns, (self.fn(to_2d(pair.sender, layout)), self.fn(to_2d(pair.target, layout)))))
        return {self.entry.column: self._scorer(pair)(pair, layout)}

    def null(self, pair: Pair, value: float, permutations: int, seed: int) -> dict:
        """The permutation null of this similarity or distance on `pair`: the index with the target's images
        shuffled (the pairing broken, each side's own structure kept), `permutations` times. Returns
        `{column}_null` (the null's 95th percentile for a similarity, its 5th for a distance: what the value
        must beat) and `{column}_p` ((1 + shuffles at least as extreme as `value`) / (1 + shuffles))."""
        import numpy as np
        import torch

        if self.kind not in ("similarity", "distance") or not permutations:
            return {}
        layout = pair.layouts.get(self.name) or self.layout
        score = self._scorer(pair)
        gen = torch.Generator().manual_seed(seed)
        draws = []
        for _ in range(permutations):
            order = torch.randperm(len(pair.target), generator=gen)
            shuffled = Pair(
                pair.sender, pair.target[order], pair.resize, pair.fit, pair.layouts, pair.options, pair._fitted
            )
            draws.append(score(shuffled, layout))
        draws = np.asarray(draws)
        similar = self.kind == "similarity"
        extreme = (draws >= value) if similar else (draws <= value)
        col = self.entry.column
        return {
            f"{col}_null": float(np.percentile(draws, 95 if similar else 5)),
            f"{col}_p": float((1 + extreme.sum()) / (1 + permutations)),
        }

    def dissimilarity(self, pair: Pair) -> float:
        """d(A, B) for representation tests: 1 - s for a similarity, the distance itself."""
        if not self.entry.reptest_column:
            raise ValueError(f"index {self.name!r} takes no part in representation tests")
        if self.target_first_in_reptests:
            pair = Pair(pair.target, pair.sender, fit=pair.fit)
        value = (self.score or _on_pair(self.fn))(pair, pair.layouts.get(self.name) or self.layout)
        return 1.0 - value if self.kind == "similarity" else value


def register_index(
    entry: IndexEntry | str,
    fn: Callable,
    layout: str,
    *,
    score: Callable[[Pair, str], float] | None = None,
    symmetric: bool = True,
    after_fit: Callable[[Network], dict] | None = None,
    target_first_in_reptests: bool = False,
    memory: Callable | None = None,
    work: Callable | None = None,
    numbers: Callable[[int, int, int], int] | None = None,
    count: Callable[[int, int, int], object] | None = None,
    fit_images: bool = False,
    similarity_by: str = "pairwise",
    options: dict | None = None,
    version: str | None = None,
) -> Index:
    """Register an index: `entry` is its catalogue entry (a new index: added to the catalogue, so its Parquet
    columns and its place in the reports follow) or the name of an entry the catalogue already holds; `memory`
    and `work`, what planning charges it (or `numbers` and `count`, its models on both sides' matrices, which
    they are then built from); `similarity_by` and `options`, how a `similarity:` entry computes it (scope
    "similarity"; see `Index`); `version`, a string to bump when its code changes its numbers (default: its
    plugin module's)."""
    if isinstance(entry, str):
        entry = INDEX_CATALOGUE[entry]
    elif INDEX_CATALOGUE.get(entry.index) != entry:
        add_entry(entry)
    if similarity_by not in SIMILARITY_BY:
        raise ValueError(
            f"index {entry.index!r}: similarity_by must be one of {SIMILARITY_BY}, found {similarity_by!r}"
        )
    one_side = entry.kind == "rank"
    if memory is None and numbers is not None:
        memory = (memory_model.each_side if one_side else memory_model.on_matrices)(numbers)
    if work is None and count is not None:
        work = (work_model.each_side if one_side else work_model.on_matrices)(count)
    planned = dict(memory=memory, work=work, numbers=numbers, count=count, fit_images=fit_images)
    computed = dict(similarity_by=similarity_by, options=dict(options or {}))
    index = Index(entry, fn, layout, score, symmetric, after_fit, target_first_in_reptests, **planned, **computed)
    return INDICES.add(entry.index, index, version)


SIMILARITY_BY = ("pairwise", "cka", "saliency")
