"""The `representation_tests` section: Ding et al.'s sensitivity and specificity tests (Balogh & Jelasity 2025 Section
5).

Each test entry expands into units; a unit is one Ray Tune trial that probes a set S of representations,
takes the best-probing one as the reference A (Balogh & Jelasity 2025 Eq. 9) and measures every B in S against it:
- sensitivity: one unit per (donor, layer); S = the layer at full rank and at each requested rank: SVD
  low-rank approximations in the channel space (every position's channel vector, as Balogh & Jelasity 2025's reference
  code reshapes to (N*H*W, C)); a listed rank equal to the channel count is the full-rank member itself;
- specificity: one unit per entry; S = every listed layer of every listed donor (different seeds).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from sweep.config.data import DataSpec
from sweep.config.donors import DonorSpec, resolve_ref
from sweep.config.errors import SpecError
from sweep.config.fields import NAME_RE, Option, Section, by_key, check_value, index_revisions, stable_hash
from sweep.config.shapes import activation_shape, channels, check_dm_samples
from sweep.registry import ARCHITECTURES
from sweep.store.catalogue import reptest_indices
from sweep.store.schema import SCHEMA_VERSION

# What a unit computes, versioned apart from the results schema: a fix that changes a unit's numbers bumps it,
# so recorded rows of the old computation are not reused. 2: d_dm_func is relative to A's own network (its
# low-rank front where the reference is a low-rank member), not to A's full-rank donor.
REVISION = 2

TESTS = ("sensitivity", "specificity")


@dataclass(frozen=True, kw_only=True)
class RepTestSpec:
    """One unit of a representation test. `unit_id` hashes every scientific field."""

    test: str
    dataset: str
    train_size: int | None
    val_size: int
    test_size: int | None
    arch: str
    members: tuple[tuple[str, str, str, int | None], ...]  # (donor ref, donor_key, layer, rank or None)
    indices: tuple[str, ...]
    dm_functional: bool
    dm_samples: int
    samples: int  # test images: probe accuracy, indices and functional DM
    probe_train_size: int  # training images: probes and the low-rank bases
    probe_epochs: int
    probe_lr: float
    seed: int
    name: str = field(default="", compare=False)

    @property
    def unit_id(self) -> str:
        fields = dataclasses.asdict(self)
        fields.pop("name")
        if revisions := index_revisions(self.indices):
            fields["index_revisions"] = revisions
        return stable_hash({"kind": "representation-test", "v": SCHEMA_VERSION, "rev": REVISION, **fields})

    @property
    def label(self) -> str:
        first = self.members[0]
        what = (
            f"{first[0]} @{first[2]}, {len(self.members)} ranks"
            if self.test == "sensitivity"
            else f"{len({m[0] for m in self.members})} donors x {len({m[2] for m in self.members})} layers"
        )
        prefix = f"{self.name} ({self.test})" if self.name and self.name != self.test else self.test
        return f"{prefix}: {what}"


PROBE_OPTIONS = by_key(
    (
        Option("train_size", "integer", 2000, low=10, cap="train"),
        Option("epochs", "integer", 10, low=1),
        Option("lr", "number", 1e-3, low=0.0),
    )
)
OPTIONS = by_key(
    (
        Option("name", "string", "", doc="a label"),
        Option("test", "string", choices=TESTS),
        Option("donors", "string", many=True, refs=True, doc="zoo / file / robustbench donors of one architecture"),
        Option("layers", "string", "all", or_list=True, doc="all, or a list of stitch points"),
        Option("ranks", "integer", many=True, low=1, only=("test", "sensitivity"), doc="channel ranks"),
        Option(
            "indices",
            "string",
            None,
            many=True,
            derived=True,
            choices=reptest_indices,
            doc="those with a dissimilarity",
        ),
        Option("dm_functional", "bool", True),
        Option("dm_samples", "integer", 100, low=1, cap="train"),
        Option("samples", "integer", 1000, low=10, cap="test"),
        Option("probe", "mapping", None, fields=PROBE_OPTIONS, doc="linear probes"),
        Option("seed", "integer", 0, low=0),
    )
)


def parse_reptests(raw: Any, data: DataSpec, donors: dict[str, DonorSpec], used: set[str]) -> list[RepTestSpec]:
    if not isinstance(raw, list) or not raw:
        raise SpecError("representation_tests", "a non-empty list of tests", raw)
    units: list[RepTestSpec] = []
    for t, entry in enumerate(raw):
        units.extend(_parse_test(entry, f"representation_tests[{t}]", data, donors, used))
    return units


def _parse_test(entry: Any, path: str, data: DataSpec, donors: dict, used: set[str]) -> list[RepTestSpec]:
    s = Section(entry, path, set(OPTIONS))
    name = s.read(OPTIONS["name"])
    if name and not NAME_RE.match(name):
        raise SpecError(f"{path}.name", "letters, digits, '_', '-' or '.'", name)
    test = s.read(OPTIONS["test"])
    chosen = _chosen_donors(s, path, test, data, donors)
    arch = chosen[0].arch
    valid = ARCHITECTURES[arch].points()
    layers_raw = s.raw.get("layers", OPTIONS["layers"].default)
    layers = (
        ARCHITECTURES[arch].stitch_points()
        if layers_raw == "all"
        else [
            check_value(v, f"{path}.layers[{k}]", "string", choices=valid)
            for k, v in enumerate(layers_raw if isinstance(layers_raw, list) and layers_raw else [None])
        ]
    )
    shapes = {layer: activation_shape(arch, data.dataset, layer) for layer in layers}
    ranks = _ranks(s, path, test, shapes)
    common = _settings(s, path, data, shapes)
    common.update(test=test, arch=arch, name=name)
    used.update(d.name for d in chosen)
    if test == "specificity":
        return [
            RepTestSpec(members=tuple((d.ref, d.donor_key, layer, None) for d in chosen for layer in layers), **common)
        ]
    return [
        RepTestSpec(
            members=((d.ref, d.donor_key, layer, None),)
            + tuple((d.ref, d.donor_key, layer, k) for k in ranks if k < channels(shapes[layer])),
            **common,
        )
        for d in chosen
        for layer in layers
    ]


def _chosen_donors(s: Section, path: str, test: str, data: DataSpec, donors: dict) -> list[DonorSpec]:
    refs = s.read(OPTIONS["donors"])
    chosen = [resolve_ref(r, f"{path}.donors[{k}]", donors) for k, r in enumerate(refs)]
    archs = {d.arch for d in chosen}
    if len(archs) > 1:
        raise SpecError(f"{path}.donors", "donors of one architecture", sorted(archs))
    for k, d in enumerate(chosen):
        if d.data.dataset != data.dataset:
            raise SpecError(
                f"{path}.donors[{k}]",
                f"a donor trained on the sweep's data ({data.dataset})",
                f"{d.ref} on {d.data.dataset}",
            )
    if test == "specificity" and len(chosen) < 2:
        raise SpecError(f"{path}.donors", "at least two donors (instances with different seeds)", refs)
    return chosen


def _ranks(s: Section, path: str, test: str, shapes: dict) -> list[int]:
    """Sensitivity: the listed channel ranks, largest first, each at most every layer's channel count."""
    if test != "sensitivity":
        if "ranks" in s.raw:
            raise SpecError(
                f"{path}.ranks", "no ranks for a specificity test", s.raw["ranks"], "ranks apply to test: sensitivity"
            )
        return []
    ranks = sorted(set(s.read(OPTIONS["ranks"])), reverse=True)
    for layer, shape in shapes.items():
        if ranks[0] > channels(shape):
            raise SpecError(
                f"{path}.ranks",
                f"channel ranks of {layer}: at most its {channels(shape)} channels"
                " (the approximation is in the channel space)",
                ranks[0],
            )
    return ranks


def _settings(s: Section, path: str, data: DataSpec, shapes: dict) -> dict:
    """The unit fields every unit of the test shares: data, indices, DM, probes, seed."""
    n_train, n_test = data.sizes()
    probe = Section(s.raw.get("probe", {}), f"{path}.probe", set(PROBE_OPTIONS))
    known = reptest_indices()  # the catalogue's indices with a dissimilarity column
    indices = tuple(s.read(OPTIONS["indices"], default=known))
    dm_functional = s.read(OPTIONS["dm_functional"])
    dm_samples = s.read(OPTIONS["dm_samples"], default=OPTIONS["dm_samples"].capped(n_train), high=n_train)
    if dm_functional or "dm" in indices:
        # every member may be the source and every member the reference: the fit must be determined for all
        layer_shapes = list(shapes.values())
        check_dm_samples(f"{path}.dm_samples", dm_samples, layer_shapes, layer_shapes, "between these layers")
    return dict(
        **data.fields(),
        indices=indices,
        dm_functional=dm_functional,
        dm_samples=dm_samples,
        samples=s.read(OPTIONS["samples"], default=OPTIONS["samples"].capped(n_test), high=n_test),
        probe_train_size=probe.read(
            PROBE_OPTIONS["train_size"], default=PROBE_OPTIONS["train_size"].capped(n_train), high=n_train
        ),
        probe_epochs=probe.read(PROBE_OPTIONS["epochs"]),
        probe_lr=probe.read(PROBE_OPTIONS["lr"]),
        seed=s.read(OPTIONS["seed"]),
    )
