"""The similarity indices a search space may request (`indices:`), as registered entries: each pairs its
torch-free catalogue entry (`sweep.store.catalogue`: name, columns, direction) with how the engine computes it
from a pair of activations (`Pair`). The math itself is in `similarity.py`.

A new index is one call of `register_index` with its catalogue entry and its function (see docs/development.md):
its Parquet columns, its place in the layer matrices, Table 1 and the rank-correlation tables follow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

from sweep.registry import INDICES, lazy
from sweep.store.catalogue import INDEX_CATALOGUE, IndexEntry, add_entry

# The math (`similarity.py`, PyTorch) is imported the first time an index is computed: reading the registry,
# as checking a search space does, imports no PyTorch.
_SIM = "sweep.measures.similarity"
to_2d = lazy(f"{_SIM}:to_2d")


@dataclass
class Pair:
    """What an index sees of a (sender, target) pair: the activations of the same test images, as each model
    produced them (any shape; the index's layout makes them 2-D). In a stitching trial the sender is f<=i and
    the target g<=j; in a representation test the sender is the member B and the target the reference A.

    `resize`: the sender's maps at the target's spatial size, as the stitcher sees them (for direct matching).
    `fit`: the same pair on the K training images, computed only when an index asks (the DM distance).
    `layouts`: per-index layouts that override the registered ones (a trial's `layouts:` for PWCCA and OPD)."""

    sender: torch.Tensor
    target: torch.Tensor
    resize: Callable[[torch.Tensor], torch.Tensor] = lambda a: a
    fit: Callable[[], tuple[torch.Tensor, torch.Tensor]] | None = None
    layouts: dict = field(default_factory=dict)
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


def _dm_score(pair: Pair, layout: str) -> float:
    """The structural DM distance as the reference code computes it: the DM map fitted on the K training
    images, its squared relative error on the test images (the sender resized as the stitcher sees it), summed
    over batches of images so that the resized sender is never held whole (a layer4 sender resized to layer1's
    32 x 32 is 2 MB per image)."""
    from sweep.measures.matrices import ROWS
    from sweep.measures.similarity import dm_fit, dm_sums

    fit_a, fit_b = pair.fit_pair()
    theta = dm_fit(to_2d(pair.resize(fit_a), layout), to_2d(fit_b, layout))
    step = max(1, ROWS // len(to_2d(pair.target[:1], layout)))  # images per batch: about ROWS rows
    residual = norm_b = 0.0
    for i in range(0, len(pair.target), step):
        sender, target = to_2d(pair.resize(pair.sender[i : i + step]), layout), to_2d(pair.target[i : i + step], layout)
        r, b = dm_sums(theta, sender, target)
        residual, norm_b = residual + r, norm_b + b
    if norm_b == 0:
        raise ValueError("dm_error: the target representation is zero")
    return residual / norm_b


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
    # workspace on n images of a `sweep.plan.memory.ShapePair` (k: the fit images); `work(pair, layout, n, k)`, its
    # float64 algebra (`sweep.plan.index_costs.Work`). None: the generic model of its kind (two float64 copies of each
    # side and the p x p products; priced as the covariance form).
    memory: Callable | None = None
    work: Callable | None = None
    fit_images: bool = False  # it reads the pair's fit images too (the DM distance): they are held with the rest
    # Scope "similarity" (a `similarity:` entry's `measure`): how the similarity kind computes it. "pairwise":
    # `fn(a, b, **options)` on every pair of points' whole (images x features) matrices, returning the value or
    # (value, further columns); "cka": the kind's streamed / minibatch CKA; "saliency": its input-gradient cosine.
    similarity_by: str = "pairwise"
    # the similarity entry's options it takes: option name -> `fn`'s keyword (SVCCA: svcca_max_k -> max_k)
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

    def values(self, pair: Pair) -> dict:
        """The trials columns of this index on `pair`."""
        layout = pair.layouts.get(self.name) or self.layout
        if self.kind == "rank":
            return dict(zip(self.columns, (self.fn(to_2d(pair.sender, layout)), self.fn(to_2d(pair.target, layout)))))
        return {self.entry.column: (self.score or _on_pair(self.fn))(pair, layout)}

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
        score = self.score or _on_pair(self.fn)
        gen = torch.Generator().manual_seed(seed)
        draws = []
        for _ in range(permutations):
            order = torch.randperm(len(pair.target), generator=gen)
            shuffled = Pair(pair.sender, pair.target[order], pair.resize, pair.fit, pair.layouts, pair._fitted)
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
    fit_images: bool = False,
    similarity_by: str = "pairwise",
    options: dict | None = None,
    version: str | None = None,
) -> Index:
    """Register an index: `entry` is its catalogue entry (a new index: added to the catalogue, so its Parquet
    columns and its place in the reports follow) or the name of an entry the catalogue already holds; `memory`
    and `work`, what planning charges it; `similarity_by` and `options`, how a `similarity:` entry computes it
    (scope "similarity"; see `Index`); `version`, a string to bump when its code changes its numbers (default:
    its plugin module's)."""
    if isinstance(entry, str):
        entry = INDEX_CATALOGUE[entry]
    elif INDEX_CATALOGUE.get(entry.index) != entry:
        add_entry(entry)
    if similarity_by not in SIMILARITY_BY:
        raise ValueError(
            f"index {entry.index!r}: similarity_by must be one of {SIMILARITY_BY}, found {similarity_by!r}"
        )
    planned = dict(memory=memory, work=work, fit_images=fit_images)
    computed = dict(similarity_by=similarity_by, options=dict(options or {}))
    index = Index(entry, fn, layout, score, symmetric, after_fit, target_first_in_reptests, **planned, **computed)
    return INDICES.add(entry.index, index, version)


SIMILARITY_BY = ("pairwise", "cka", "saliency")


# Their memory and work models (`sweep.plan.memory`, `sweep.plan.index_costs`, torch-free) are named, read when planned.
_MEM, _COST = "sweep.plan.memory", "sweep.plan.index_costs"


def _models(name: str) -> dict:
    return {"memory": lazy(f"{_MEM}:{name}_bytes"), "work": lazy(f"{_COST}:{name}_index_work")}


register_index("cka", lazy(f"{_SIM}:linear_cka"), "flatten", similarity_by="cka", **_models("cka"))  # Eq. 4
register_index(
    "pwcca", lazy(f"{_SIM}:pwcca"), "pooled", symmetric=False, target_first_in_reptests=True, **_models("pwcca")
)  # Eq. 5-6, weights: A
register_index("opd", lazy(f"{_SIM}:opd"), "flatten", **_models("opd"))  # Eq. 8
register_index(
    "dm", lazy(f"{_SIM}:dm_distance"), "positions", score=_dm_score, symmetric=False, fit_images=True, **_models("dm")
)  # 2.3, out of sample
register_index("rank", lazy(f"{_SIM}:numerical_rank"), "positions", **_models("rank"))  # B.2.1, each donor side


def receiver_rank(sender, end, x: torch.Tensor, device: torch.device, max_features: int = 8000) -> int:
    """Smith & Marcu 2024 B.2.1: the numerical rank of the receiver's first layer after the stitch (the first
    convolution or linear layer that `end` runs), on what `sender` feeds it for the images `x`: flattened,
    at most `max_features` features sampled with a fixed seed, covariance singular values above 1e-3 of the
    largest."""
    import torch

    from sweep.data.stream import chunks
    from sweep.measures.similarity import numerical_rank

    first = next((m for m in end.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))), None)
    if first is None:
        raise ValueError("receiver_rank: the end model has no convolution or linear layer after the point")
    captured: list[torch.Tensor] = []

    class _Stop(Exception):
        pass

    def hook(_module, _inputs, output):
        captured.append(output.detach().float().flatten(1).cpu())
        raise _Stop  # nothing after the first layer is needed

    handle = first.register_forward_hook(hook)
    was = end.training
    end.eval()
    try:
        with torch.no_grad():
            for xb in chunks(x, 250):
                try:
                    end(sender(xb.to(device)))
                except _Stop:
                    pass
    finally:
        handle.remove()
        end.train(was)
    acts = torch.cat(captured)
    if acts.shape[1] > max_features:
        keep = torch.randperm(acts.shape[1], generator=torch.Generator().manual_seed(0))[:max_features]
        acts = acts[:, keep]
    return numerical_rank(acts)


def _receiver_ranks(net: Network) -> dict:
    """Smith & Marcu 2024 B.2.1: the receiver's first-layer rank fed by the stitcher, and by its own front."""
    return {
        "rank_receiver": receiver_rank(net.stitched_sender, net.end, net.x, net.device),
        "rank_receiver_end": receiver_rank(
            net.end_front, net.end, net.x if net.x_end is None else net.x_end, net.device
        ),
    }


register_index("receiver_rank", lazy(f"{_SIM}:numerical_rank"), "flatten", after_fit=_receiver_ranks)

# Measures of a `similarity:` entry only (Cianfarani et al. 2022 B.1; saliency: their input gradients)
register_index(
    "svcca",
    lazy("sweep.measures.cca:svcca_columns"),
    "flatten",
    memory=lazy(f"{_MEM}:svcca_bytes"),
    options={"svcca_max_k": "max_k"},  # the unit's protocol: each side keeps at most svcca_max_k directions
)
register_index("saliency", lazy("sweep.measures.saliency:saliency_cosines"), "flatten", similarity_by="saliency")
