"""The `examples` section: images a report draws beside the numbers (Smith & Marcu 2024 Fig. 1a and Figs A1-A2,
Cianfarani et al. 2022 Fig. 8). Each entry shows one kind of picture (`show`), one unit per dataset, sender or
donor:

- `images`: `per_class` test images of each of `classes`, drawn at random (`seed`) from each of `datasets`.
- `palette`: the colours a dataset paints its images with (`datasets`: the colour-MNIST variants' ten), as
  flat swatches.
- `noise`: one clustered-noise sample of each of `classes` that a noise sender (`senders`) sends to a
  receiver (`receivers`) at each of `points`: the same sample a stitching trial of that pair draws first
  (the sender's own seed, else `seed` as the trial's), its first `maps` feature maps.
- `attacks`: the first `images` test images of each of `donors`, and the same images attacked against that
  donor by each of `attacks` (threat model, eps, steps, step size), with each perturbation magnified.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from sweep.config.attacks import ATTACK_OPTIONS, pgd_settings
from sweep.config.donors import resolve_ref
from sweep.config.errors import SpecError
from sweep.config.fields import NAME_RE, Option, Section, by_key, check_value, stable_hash
from sweep.config.shapes import activation_shape
from sweep.registry import ARCHITECTURES, DATASETS
from sweep.store.schema import SCHEMA_VERSION

SHOWS = ("images", "palette", "noise", "attacks")
ATTACK_FIELDS = by_key(o for o in ATTACK_OPTIONS.values() if o.key != "source")
OPTIONS = by_key(
    (
        Option("name", "string", "", doc="a label"),
        Option("show", "string", "images", choices=SHOWS, doc="images | palette | noise | attacks"),
        Option(
            "datasets",
            "string",
            many=True,
            choices=lambda: DATASETS,
            only=("show", ("images", "palette")),
            doc="images, palette: one unit each",
        ),
        Option(
            "classes",
            "integer",
            [0, 1],
            many=True,
            low=0,
            only=("show", ("images", "noise")),
            doc="images, noise: the classes shown",
        ),
        Option("per_class", "integer", 4, low=1, high=64, only=("show", "images"), doc="images: test images a class"),
        Option("senders", "string", many=True, refs=True, only=("show", "noise"), doc="noise: noise sender REFs"),
        Option("receivers", "string", many=True, refs=True, only=("show", "noise"), doc="noise: receiver REFs"),
        Option("points", "string", many=True, only=("show", "noise"), doc="noise: the receivers' points"),
        Option("maps", "integer", 64, low=1, only=("show", "noise"), doc="noise: the first N feature maps"),
        Option("donors", "string", many=True, refs=True, only=("show", "attacks"), doc="attacks: donor REFs"),
        Option("attacks", "mapping", many=True, fields=ATTACK_FIELDS, only=("show", "attacks"), doc="attacks"),
        Option(
            "images", "integer", 1, low=1, high=16, only=("show", "attacks"), doc="attacks: the first N test images"
        ),
        Option("seed", "integer", 0, low=0, doc="images: the draw; noise: the trial seed; attacks: random starts"),
    )
)


def _uses(show: str) -> set[str]:
    """The options a kind of picture reads besides name, show and seed (those whose `only` names it)."""
    return {
        k
        for k, o in OPTIONS.items()
        if o.only and show in (o.only[1] if isinstance(o.only[1], tuple) else (o.only[1],))
    }


USES = {show: _uses(show) for show in SHOWS}


@dataclass(frozen=True, kw_only=True)
class ExamplesSpec:
    """One unit: the pictures of one dataset, one (sender, receiver, point) or one donor. `unit_id` hashes every
    field but the labels."""

    show: str
    dataset: str
    train_size: int | None = None
    val_size: int = 0
    test_size: int | None = None
    donor_key: str | None = None  # attacks: the attacked donor; noise: the receiver
    arch: str | None = None
    point: str | None = None
    noise_sigma: float | None = None
    classes: tuple[int, ...] = ()
    per_class: int = 0
    maps: int = 0
    images: int = 0
    attacks: tuple[tuple, ...] = ()  # (threat, eps, steps, step size) each
    seed: int = 0
    donor: str = field(default="", compare=False)  # the attacked donor's or the receiver's reference
    sender: str = field(default="", compare=False)
    name: str = field(default="", compare=False)
    position: int = field(default=0, compare=False)  # the unit's place in its entry: the report's row order

    LABELS = ("donor", "sender", "name", "position")

    @property
    def unit_id(self) -> str:
        fields = {k: v for k, v in dataclasses.asdict(self).items() if k not in self.LABELS}
        return stable_hash({"kind": "examples", "v": SCHEMA_VERSION, **fields})

    @property
    def label(self) -> str:
        name = f"{self.name}: " if self.name else ""
        what = {
            "images": f"{len(self.classes)} x {self.per_class} images of {self.dataset}",
            "palette": f"the colours of {self.dataset}",
            "noise": f"noise of {self.sender} into {self.donor} @{self.point}",
            "attacks": f"{len(self.attacks)} attacks on {self.donor}, {self.images} images",
        }[self.show]
        return name + what


def parse_examples(raw: Any, donors: dict, used: set[str]) -> tuple:
    """Every unit of the `examples` section (a list of entries, or one entry)."""
    entries = raw if isinstance(raw, list) else [raw]
    if not entries or not all(isinstance(e, dict) for e in entries):
        raise SpecError("examples", "a mapping, or a non-empty list of mappings", raw)
    units: dict[str, ExamplesSpec] = {}
    for i, entry in enumerate(entries):
        path = "examples" if isinstance(raw, dict) else f"examples[{i}]"
        for k, unit in enumerate(_parse_entry(entry, path, donors, used)):
            units.setdefault(unit.unit_id, dataclasses.replace(unit, position=k))
    return tuple(units.values())


def _parse_entry(entry: dict, path: str, donors: dict, used: set[str]) -> list[ExamplesSpec]:
    s = Section(entry, path, set(OPTIONS))
    name = s.read(OPTIONS["name"])
    if name and not NAME_RE.match(name):
        raise SpecError(f"{path}.name", "letters, digits, '_', '-' or '.'", name)
    show = s.read(OPTIONS["show"])
    for key in sorted(set(s.raw) - USES[show] - {"name", "show", "seed"}):
        uses = [k for k, v in USES.items() if key in v]
        raise SpecError(f"{path}.{key}", f"a field of show: {show}: one of {sorted(USES[show])}", key,
                        f"{key} applies to show: {' | '.join(uses)}")  # fmt: skip
    common = dict(show=show, name=name, seed=s.read(OPTIONS["seed"]))
    if show in ("images", "palette"):
        return [_dataset_unit(s, path, show, ds, common) for ds in s.read(OPTIONS["datasets"])]
    if show == "noise":
        return _noise_units(s, path, donors, used, common)
    return _attack_units(s, path, donors, used, common)


def _dataset_unit(s: Section, path: str, show: str, dataset: str, common: dict) -> ExamplesSpec:
    info = DATASETS[dataset]
    if show == "palette":
        if info.palette is None:
            painted = sorted(n for n in DATASETS if DATASETS[n].palette is not None)
            raise SpecError(f"{s.path}.datasets", f"a dataset painted from a palette, e.g. {painted[0]}", dataset)
        return ExamplesSpec(dataset=dataset, **common)
    classes = tuple(s.read(OPTIONS["classes"], high=info.num_classes - 1))
    return ExamplesSpec(dataset=dataset, classes=classes, per_class=s.read(OPTIONS["per_class"]), **common)


def _noise_units(s: Section, path: str, donors: dict, used: set[str], common: dict) -> list[ExamplesSpec]:
    senders = [resolve_ref(r, f"{path}.senders[{k}]", donors) for k, r in enumerate(s.read(OPTIONS["senders"]))]
    for k, sender in enumerate(senders):
        if sender.network:
            raise SpecError(f"{path}.senders[{k}]", "a noise sender (a donor with noise: {...})", sender.ref)
    # the receivers' data, key and point name the samples (as in a trial); their weights are not read
    receivers = [resolve_ref(r, f"{path}.receivers[{k}]", donors) for k, r in enumerate(s.read(OPTIONS["receivers"]))]
    for k, receiver in enumerate(receivers):
        if not receiver.network:
            raise SpecError(f"{path}.receivers[{k}]", "a network (noise is sent into one)", receiver.ref)
    raw_points = s.read(OPTIONS["points"])
    units = []
    for receiver in receivers:
        valid = ARCHITECTURES[receiver.arch].points()
        points = [check_value(p, f"{path}.points[{k}]", "string", choices=valid) for k, p in enumerate(raw_points)]
        classes = tuple(s.read(OPTIONS["classes"], high=DATASETS[receiver.data.dataset].num_classes - 1))
        for sender in senders:
            units += [
                ExamplesSpec(
                    dataset=receiver.data.dataset,
                    donor_key=receiver.donor_key,
                    arch=receiver.arch,
                    point=point,
                    noise_sigma=sender.noise_sigma,
                    classes=classes,
                    maps=min(s.read(OPTIONS["maps"]), _channels(receiver.arch, receiver.data.dataset, point)),
                    donor=receiver.ref,
                    sender=sender.ref,
                    **dict(common, seed=common["seed"] if sender.noise_seed is None else sender.noise_seed),
                )
                for point in points
            ]
    return units


def _channels(arch: str, dataset: str, point: str) -> int:
    shape = activation_shape(arch, dataset, point)
    return shape[0] if len(shape) == 3 else 1


def _attack_units(s: Section, path: str, donors: dict, used: set[str], common: dict) -> list[ExamplesSpec]:
    chosen = [resolve_ref(r, f"{path}.donors[{k}]", donors) for k, r in enumerate(s.read(OPTIONS["donors"]))]
    for k, donor in enumerate(chosen):
        if not donor.network:
            raise SpecError(f"{path}.donors[{k}]", "a network (a noise sender cannot be attacked)", donor.ref)
    attacks = []
    for k, raw in enumerate(s.read(OPTIONS["attacks"])):
        at = Section(raw, f"{path}.attacks[{k}]", set(ATTACK_FIELDS))
        if "eps" not in at.raw:
            raise SpecError(f"{at.path}.eps", "the attack's budget", "nothing", "the field is required")
        pgd = pgd_settings(at, None)
        attacks.append((pgd["attack_norm"], pgd["attack_eps"], pgd["attack_steps"], pgd["attack_step_size"]))
    units = []
    for donor in chosen:
        used.add(donor.name)
        images = s.read(OPTIONS["images"], high=min(OPTIONS["images"].high, donor.data.sizes()[1]))
        units.append(
            ExamplesSpec(
                **donor.data.fields(),
                donor_key=donor.donor_key,
                arch=donor.arch,
                images=images,
                attacks=tuple(attacks),
                donor=donor.ref,
                **common,
            )
        )
    return units
