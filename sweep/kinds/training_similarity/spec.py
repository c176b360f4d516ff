"""The `training_similarity` section: CKA across the training epochs of one donor (Cianfarani et al. 2022
Fig. 6, Fig. 25), on the points, images and attack settings the `similarity` section declares."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from sweep.config.attacks import ATTACK_OPTIONS, pgd_settings
from sweep.config.donors import DonorUnit, resolve_ref
from sweep.config.errors import SpecError
from sweep.config.fields import Option, Section, by_key, stable_hash
from sweep.config.points import points
from sweep.kinds.similarity.spec import INPUTS, OPTIONS
from sweep.store.schema import SCHEMA_VERSION

TRAINING_OPTIONS = by_key(
    (
        Option("name", "string", "", doc="a label: units of one entry are averaged in the report"),
        Option("donors", "string", many=True, refs=True, doc="zoo donors trained with checkpoint_every"),
        OPTIONS["points"],  # these as the similarity units': declared once
        Option("inputs", "string", "benign", choices=INPUTS, doc="adversarial: crafted against the final epoch"),
        OPTIONS["images"],
        OPTIONS["batch_size"],
        OPTIONS["passes"],
        Option(
            "attack",
            "mapping",
            None,
            fields={k: v for k, v in ATTACK_OPTIONS.items() if k != "source"},
            doc="as similarity's, without source (always the donor's final epoch)",
        ),
        OPTIONS["seed"],
    )
)


@dataclass(frozen=True, kw_only=True)
class TrainingSimilaritySpec(DonorUnit):
    """One unit of CKA across training epochs (Cianfarani et al. 2022 Fig. 6, Fig. 25): for one donor, every
    point's epoch x epoch CKA matrix over the epochs it kept (`checkpoint_every`), minibatch estimator."""

    epochs: tuple[int, ...]
    points: tuple[str, ...]
    inputs: str
    images: int
    batch_size: int
    passes: int
    attack_norm: str | None = None
    attack_eps: float | None = None
    attack_steps: int | None = None
    attack_step_size: float | None = None
    seed: int = 0
    donor: str = field(default="", compare=False)
    name: str = field(default="", compare=False)

    @property
    def unit_id(self) -> str:
        fields = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("donor", "name")}
        return stable_hash({"kind": "training-similarity", "v": SCHEMA_VERSION, **fields})

    @property
    def label(self) -> str:
        prefix = f"{self.name}: " if self.name else ""
        return f"{prefix}{self.donor} ({self.inputs}), {len(self.epochs)} epochs x {len(self.points)} points"


def parse_training_similarity(raw: Any, data, evaluation, donors: dict, used: set[str]) -> tuple:
    """Every unit of the `training_similarity` section (a list of entries, or one): one per donor."""
    entries = raw if isinstance(raw, list) else [raw]
    if not entries or not all(isinstance(e, dict) for e in entries):
        raise SpecError("training_similarity", "a mapping, or a non-empty list of mappings", raw)
    units: dict[str, TrainingSimilaritySpec] = {}
    for i, entry in enumerate(entries):
        path = "training_similarity" if isinstance(raw, dict) else f"training_similarity[{i}]"
        for unit in _training_entry(Section(entry, path, set(TRAINING_OPTIONS)), path, evaluation, donors, used):
            units.setdefault(unit.unit_id, unit)
    return tuple(units.values())


def _training_entry(s: Section, path: str, evaluation, donors: dict, used: set[str]) -> list:
    """One entry's units: one per donor, on the test images of the data it trained on."""
    common = dict(
        inputs=s.read(TRAINING_OPTIONS["inputs"]),
        batch_size=s.read(TRAINING_OPTIONS["batch_size"]),
        passes=s.read(TRAINING_OPTIONS["passes"]),
        seed=s.read(TRAINING_OPTIONS["seed"]),
        name=s.read(TRAINING_OPTIONS["name"]),
    )
    if common["inputs"] == "adversarial":
        common.update(_training_attack(s, path, evaluation))
    elif "attack" in s.raw:
        raise SpecError(f"{path}.attack", "an option of inputs: adversarial", s.raw["attack"])
    units = []
    for k, ref in enumerate(s.read(TRAINING_OPTIONS["donors"])):
        donor = resolve_ref(ref, f"{path}.donors[{k}]", donors)
        if not donor.checkpoint_every:
            raise SpecError(
                f"{path}.donors[{k}]", "a zoo donor trained with checkpoint_every", ref, "set it on the donor"
            )
        used.add(donor.name)
        n_test = donor.data.sizes()[1]
        images = TRAINING_OPTIONS["images"]
        units.append(
            TrainingSimilaritySpec(
                **DonorUnit.of(donor),
                images=s.read(images, default=images.capped(n_test), high=n_test),
                epochs=donor.kept_epochs,
                points=points(s.raw.get("points", "stitch"), donor.arch, f"{path}.points"),
                donor=donor.ref,
                **common,
            )
        )
    return units


def _training_attack(s: Section, path: str, evaluation) -> dict:
    at = Section(s.get("attack", "mapping", {}), f"{path}.attack", set(ATTACK_OPTIONS) - {"source"})
    return pgd_settings(at, evaluation)
