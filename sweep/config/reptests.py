"""The `representation_tests` section: Ding et al.'s sensitivity and specificity tests (seed 004 Section 5).

Each test entry expands into units; a unit is one Ray Tune trial that probes a set S of representations,
takes the best-probing one as the reference A (seed 004 Eq. 9) and measures every B in S against it:
- sensitivity: one unit per (donor, layer); S = the layer at full rank and at each requested rank: SVD
  low-rank approximations in the channel space (every position's channel vector, as seed 004's reference
  code reshapes to (N*H*W, C)); a listed rank equal to the channel count is the full-rank member itself;
- specificity: one unit per entry; S = every listed layer of every listed donor (different seeds).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from analysis.store.catalogue import reptest_indices
from analysis.store.schema import SCHEMA_VERSION
from sweep.config.data import DataSpec
from sweep.config.donors import DonorSpec, resolve_ref
from sweep.config.errors import SpecError
from sweep.config.fields import NAME_RE, Section, check_value, stable_hash
from sweep.registry import ARCHITECTURES, DATASETS

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
        return stable_hash({"kind": "representation-test", "v": SCHEMA_VERSION, **fields})

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


def parse_reptests(raw: Any, data: DataSpec, donors: dict[str, DonorSpec], used: set[str]) -> list[RepTestSpec]:

    if not isinstance(raw, list) or not raw:
        raise SpecError("representation_tests", "a non-empty list of tests", raw)
    info = DATASETS[data.dataset]
    n_train, n_test = data.sizes()
    units: list[RepTestSpec] = []
    for t, entry in enumerate(raw):
        path = f"representation_tests[{t}]"
        s = Section(
            entry,
            path,
            {
                "name",
                "test",
                "donors",
                "layers",
                "ranks",
                "indices",
                "dm_functional",
                "dm_samples",
                "samples",
                "probe",
                "seed",
            },
        )
        name = s.get("name", "string", "")
        if name and not NAME_RE.match(name):
            raise SpecError(f"{path}.name", "letters, digits, '_', '-' or '.'", name)
        test = s.get("test", "string", choices=TESTS)
        refs = s.get_list("donors", "string")
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
        arch = chosen[0].arch
        valid = ARCHITECTURES[arch].stitch_points()
        layers_raw = s.raw.get("layers", "all")
        layers = (
            valid
            if layers_raw == "all"
            else [
                check_value(v, f"{path}.layers[{k}]", "string", choices=valid)
                for k, v in enumerate(layers_raw if isinstance(layers_raw, list) and layers_raw else [None])
            ]
        )
        shapes = ARCHITECTURES[arch].activation_shapes(info.channels, info.image_size, info.num_classes)
        probe = Section(s.raw.get("probe", {}), f"{path}.probe", {"train_size", "epochs", "lr"})
        probe_train = probe.get("train_size", "integer", min(2000, n_train), low=10, high=n_train)
        ranks: list[int] = []
        if test == "sensitivity":
            ranks = sorted(set(s.get_list("ranks", "integer", low=1)), reverse=True)
            for layer in layers:
                channels = shapes[layer][0] if len(shapes[layer]) == 3 else shapes[layer][-1]
                if ranks[0] > channels:
                    raise SpecError(
                        f"{path}.ranks",
                        f"channel ranks of {layer}: at most its {channels} channels"
                        " (the approximation is in the channel space)",
                        ranks[0],
                    )
        elif "ranks" in s.raw:
            raise SpecError(
                f"{path}.ranks", "no ranks for a specificity test", s.raw["ranks"], "ranks apply to test: sensitivity"
            )
        known = reptest_indices()  # the catalogue's indices with a dissimilarity column
        indices = tuple(s.get_list("indices", "string", known, choices=known))
        dm_functional = s.get("dm_functional", "bool", True)
        dm_samples = s.get("dm_samples", "integer", min(100, n_train), low=1, high=n_train)
        if dm_functional or "dm" in indices:
            # every member may be the source and every member the reference: the fit must be determined for all
            positions = [math.prod(shapes[p][1:]) if len(shapes[p]) == 3 else shapes[p][0] for p in layers]
            channels = [shapes[p][0] if len(shapes[p]) == 3 else shapes[p][1] for p in layers]
            needed = math.ceil((max(channels) + 1) / min(positions))
            if dm_samples < needed:
                raise SpecError(
                    f"{path}.dm_samples",
                    f"K >= {needed} images for a determined least-squares fit between these layers",
                    dm_samples,
                )
        common = dict(
            test=test,
            dataset=data.dataset,
            train_size=data.train_size,
            val_size=data.val_size,
            test_size=data.test_size,
            arch=arch,
            indices=indices,
            dm_functional=dm_functional,
            dm_samples=dm_samples,
            samples=s.get("samples", "integer", min(1000, n_test), low=10, high=n_test),
            probe_train_size=probe_train,
            probe_epochs=probe.get("epochs", "integer", 10, low=1),
            probe_lr=probe.get("lr", "number", 1e-3, low=0.0),
            seed=s.get("seed", "integer", 0, low=0),
            name=name,
        )
        if test == "sensitivity":
            for d in chosen:
                for layer in layers:
                    channels = shapes[layer][0] if len(shapes[layer]) == 3 else shapes[layer][-1]
                    members = ((d.ref, d.donor_key, layer, None),) + tuple(
                        (d.ref, d.donor_key, layer, k) for k in ranks if k < channels
                    )
                    units.append(RepTestSpec(members=members, **common))
        else:
            members = tuple((d.ref, d.donor_key, layer, None) for d in chosen for layer in layers)
            units.append(RepTestSpec(members=members, **common))
        used.update(d.name for d in chosen)
    return units
