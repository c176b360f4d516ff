"""The `tsne` section: 2-D t-SNE maps of a donor's representations (Balogh & Jelasity 2023 Fig. 7: layers 4-8 of
a plain and a robust ResNet-18, one point per test image, coloured by class).

Each entry lists donors; a donor is one unit: at each of `points`, the activations of a fixed random sample of
`images` test images (flattened) are embedded by scikit-learn's TSNE (`perplexity`, PCA initialisation, the
unit's `seed`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from sweep.config.donors import DonorUnit, resolve_ref
from sweep.config.errors import SpecError
from sweep.config.fields import NAME_RE, Option, Section, by_key, check_value, stable_hash
from sweep.registry import ARCHITECTURES
from sweep.store.schema import SCHEMA_VERSION

OPTIONS = by_key(
    (
        Option("name", "string", "", doc="a label"),
        Option("donors", "string", many=True, refs=True, doc="donor REFs: one unit each"),
        Option("points", "string", "stitch", or_list=True, doc="stitch (every stitch point) | a list of points"),
        Option("images", "integer", 1000, low=10, cap="test", doc="a fixed random sample of N test images"),
        Option("perplexity", "number", 30.0, low=1.0, doc="t-SNE's perplexity (scikit-learn's default)"),
        Option("seed", "integer", 0, low=0, doc="draws the sample; t-SNE's random state"),
    )
)


@dataclass(frozen=True, kw_only=True)
class EmbeddingSpec(DonorUnit):
    """One unit: one donor's t-SNE maps at its points. `unit_id` hashes every field but the labels."""

    points: tuple[str, ...]
    images: int
    perplexity: float
    seed: int = 0
    donor: str = field(default="", compare=False)
    name: str = field(default="", compare=False)

    LABELS = ("donor", "name")

    @property
    def unit_id(self) -> str:
        fields = {k: v for k, v in dataclasses.asdict(self).items() if k not in self.LABELS}
        return stable_hash({"kind": "tsne", "v": SCHEMA_VERSION, **fields})

    @property
    def label(self) -> str:
        name = f"{self.name}: " if self.name else ""
        return f"{name}t-SNE of {self.donor} at {len(self.points)} points, {self.images} images"


def parse_embeddings(raw: Any, donors: dict, used: set[str]) -> tuple:
    """Every unit of the `tsne` section (a list of entries, or one entry)."""
    entries = raw if isinstance(raw, list) else [raw]
    if not entries or not all(isinstance(e, dict) for e in entries):
        raise SpecError("tsne", "a mapping, or a non-empty list of mappings", raw)
    units: dict[str, EmbeddingSpec] = {}
    for i, entry in enumerate(entries):
        path = "tsne" if isinstance(raw, dict) else f"tsne[{i}]"
        for unit in _parse_entry(entry, path, donors, used):
            units.setdefault(unit.unit_id, unit)
    return tuple(units.values())


def _parse_entry(entry: dict, path: str, donors: dict, used: set[str]) -> list[EmbeddingSpec]:
    s = Section(entry, path, set(OPTIONS))
    name = s.read(OPTIONS["name"])
    if name and not NAME_RE.match(name):
        raise SpecError(f"{path}.name", "letters, digits, '_', '-' or '.'", name)
    refs = s.raw.get("donors")
    if not isinstance(refs, list) or not refs:
        raise SpecError(f"{path}.donors", "a non-empty list of donor references", refs)
    units = []
    for k, ref in enumerate(refs):
        donor = resolve_ref(check_value(ref, f"{path}.donors[{k}]", "string"), f"{path}.donors[{k}]", donors)
        if not donor.network:
            raise SpecError(f"{path}.donors[{k}]", "a network (a noise sender has no representation)", ref)
        n_test = donor.data.sizes()[1]
        used.add(donor.name)
        units.append(
            EmbeddingSpec(
                **DonorUnit.of(donor),
                points=_points(s.raw.get("points", "stitch"), donor.arch, f"{path}.points"),
                images=s.read(OPTIONS["images"], default=OPTIONS["images"].capped(n_test), high=n_test),
                perplexity=float(s.read(OPTIONS["perplexity"])),
                seed=s.read(OPTIONS["seed"]),
                donor=donor.ref,
                name=name,
            )
        )
    return units


def _points(raw: Any, arch: str, path: str) -> tuple[str, ...]:
    valid = ARCHITECTURES[arch].points()
    if raw == "stitch":
        return tuple(ARCHITECTURES[arch].stitch_points())
    if not isinstance(raw, list) or not raw:
        raise SpecError(path, "'stitch' or a non-empty list of points", raw)
    return tuple(check_value(p, f"{path}[{k}]", "string", choices=valid) for k, p in enumerate(raw))
