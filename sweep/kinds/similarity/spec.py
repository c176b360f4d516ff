"""The `similarity` section: representation similarity without stitching (Cianfarani et al. 2022).

Each entry lists pairs of donors (A may equal B) trained on one dataset (the sweep's, or their own `data:`);
a pair is one unit: the matrix of linear CKA between every point of A and every point of B on the first
`images` test images of that dataset, each side seeing benign images or
adversarial ones crafted against a chosen source model (PGD; Cianfarani et al. 2.3: PGD-20, eps 8/255 on
CIFAR-10). Points are the stitch points (`stitch`), every node of the network's traced graph (`modules`:
convolutions, BatchNorms, activations, pooling, additions, as Cianfarani et al.'s "all layers"), or a list of
either, validated against the architecture.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from sweep.config.attacks import ATTACK_OPTIONS, pgd_settings
from sweep.config.donors import DonorSpec, resolve_ref
from sweep.config.errors import SpecError
from sweep.config.fields import NAME_RE, Option, Section, by_key, stable_hash
from sweep.config.points import points
from sweep.registry import INDICES, did_you_mean
from sweep.store.schema import SCHEMA_VERSION

INPUTS = ("benign", "adversarial", "inverted")
ESTIMATORS = ("minibatch", "full")


def measures() -> list[str]:
    """The indices a `measure:` may name: the registered ones of scope "similarity" (`sweep.measures.indices`)."""
    return [n for n, i in INDICES.items() if "similarity" in i.scopes]


OPTIONS = by_key(
    (
        Option("name", "string", "", doc="a label"),
        Option("pairs", "mapping", pairs=("a", "b"), doc="[{a: REF, b: REF, a_inputs: benign, b_inputs: benign}]"),
        Option(
            "measure",
            "string",
            "cka",
            choices=measures,
            doc="an index of scope similarity: cka | saliency: cosine of input gradients | opd, svcca, "
            "a plugin's: on held activations, timed",
        ),
        Option("inverted", "string", None, nullable=True, doc="an inversions entry's name: A's inverted images"),
        Option("points", "string", "stitch", or_list=True, doc="stitch | modules | a list of point or node names"),
        Option("images", "integer", 1000, low=4, cap="test", doc="the first N test images"),
        Option("estimator", "string", "minibatch", choices=ESTIMATORS),
        Option("batch_size", "integer", 1024, low=4, doc="minibatch CKA: images per batch"),
        Option("passes", "integer", 3, low=1, doc="minibatch CKA: passes over the images, each reshuffled"),
        Option("attack", "mapping", None, fields=ATTACK_OPTIONS, doc="the adversarial inputs"),
        Option(
            "svcca_max_k",
            "integer",
            None,
            low=1,
            nullable=True,
            derived=True,
            doc="svcca: directions each side keeps at most; null: images // 20 (at most images // 10)",
        ),
        Option(
            "mknn_k",
            "integer",
            None,
            low=1,
            nullable=True,
            doc="mknn: neighbours per image (at most images - 1); null: 10",
        ),
        Option("seed", "integer", 0, low=0),
    )
)
SVCCA_IMAGES_PER_K = 20  # the default cap: k <= n / 20, where independent data score 0.19 (n = 1,000)
SVCCA_MAX_RATIO = 0.1  # k / n above this and SVCCA reads overfitting (independent data: 0.27 at 0.1)
PAIR_FIELDS = {"a", "b", "a_inputs", "b_inputs"}


@dataclass(frozen=True, kw_only=True)
class SimilaritySpec:
    """One unit: the CKA matrix of one pair of donors on one image set. `unit_id` hashes every scientific
    field (the donors by their keys)."""

    dataset: str
    train_size: int | None
    val_size: int
    test_size: int | None
    a_key: str
    b_key: str
    a_arch: str
    b_arch: str
    a_points: tuple[str, ...]
    b_points: tuple[str, ...]
    a_inputs: str  # "benign" | "adversarial"
    b_inputs: str
    images: int
    estimator: str | None  # CKA only
    batch_size: int | None  # minibatch only
    passes: int | None
    # the adversarial examples (when a side sees them): crafted against the donor `attack_key`
    attack_key: str | None = None
    attack_norm: str | None = None
    attack_eps: float | None = None
    attack_steps: int | None = None
    attack_step_size: float | None = None
    seed: int = 0
    measure: str = "cka"
    inversion_id: str | None = None  # the inversion unit whose images (inverted, and their targets) both see
    svcca_max_k: int | None = None  # measure svcca: the directions each side keeps at most (the protocol)
    mknn_k: int | None = None  # measure mknn: the neighbours per image, where set (None: the index's 10)
    a: str = field(default="", compare=False)  # the donors' references: labels
    b: str = field(default="", compare=False)
    attack_source: str | None = field(default=None, compare=False)
    inverted: str | None = field(default=None, compare=False)  # the inversions entry's name
    name: str = field(default="", compare=False)

    LABELS = ("a", "b", "attack_source", "inverted", "name")
    # fields a unit id leaves out at these values (older ids: units without SVCCA keep theirs)
    NEW = {"measure": "cka", "inversion_id": None, "svcca_max_k": None, "mknn_k": None}

    @property
    def unit_id(self) -> str:
        fields = {k: v for k, v in dataclasses.asdict(self).items() if k not in self.LABELS}
        fields = {k: v for k, v in fields.items() if k not in self.NEW or v != self.NEW[k]}
        return stable_hash({"kind": "similarity", "v": SCHEMA_VERSION, **fields})

    @property
    def label(self) -> str:
        sides = f"{self.a} ({self.a_inputs}) ~ {self.b} ({self.b_inputs})"
        attack = f" against {self.attack_source}" if self.attack_source else ""
        points = f"{len(self.a_points)}x{len(self.b_points)} points" if self.a_points else "saliency"
        index = INDICES[self.measure]
        if index.similarity_by == "pairwise":  # named, with the protocol it takes (SVCCA's cap)
            cap = f", k <= {self.svcca_max_k}" if "svcca_max_k" in index.options else ""
            cap += f", k = {self.mknn_k}" if self.mknn_k is not None else ""
            points += f" ({self.measure}{cap})"
        inverted = f" (inverted by {self.inverted})" if self.inverted else ""
        return f"{self.name + ': ' if self.name else ''}{sides}{attack}{inverted}, {points}, {self.images} images"


def parse_similarity(
    raw: Any, data, evaluation, donors: dict[str, DonorSpec], used: set[str], inversions: tuple = ()
) -> tuple:
    """Every unit of the `similarity` section (a list of entries, or one entry); `inversions`: the units of the
    `inversions` section, which `inverted: NAME` refers to."""
    entries = raw if isinstance(raw, list) else [raw]
    if not entries or not all(isinstance(e, dict) for e in entries):
        raise SpecError("similarity", "a mapping, or a non-empty list of mappings", raw)
    units: dict[str, SimilaritySpec] = {}
    for i, entry in enumerate(entries):
        path = "similarity" if isinstance(raw, dict) else f"similarity[{i}]"
        for unit in _parse_entry(entry, path, data, evaluation, donors, used, inversions):
            units.setdefault(unit.unit_id, unit)
    return tuple(units.values())


def _parse_entry(entry: dict, path: str, data, evaluation, donors, used, inversions) -> list[SimilaritySpec]:
    s = Section(entry, path, set(OPTIONS))
    measure = s.read(OPTIONS["measure"])
    on_points = INDICES[measure].similarity_by != "saliency"  # saliency: one score of the inputs, no points
    inverted = s.read(OPTIONS["inverted"])
    pairs = s.raw.get("pairs")
    if not isinstance(pairs, list) or not pairs:
        raise SpecError(f"{path}.pairs", "a non-empty list of {a: REF, b: REF}", pairs)
    units = []
    for k, praw in enumerate(pairs):
        ppath = f"{path}.pairs[{k}]"
        p = Section(praw, ppath, PAIR_FIELDS)
        a = resolve_ref(p.get("a", "string"), f"{ppath}.a", donors)
        b = resolve_ref(p.get("b", "string"), f"{ppath}.b", donors)
        if b.data.dataset != a.data.dataset:  # both see the same images: those of the data they trained on
            raise SpecError(f"{ppath}.b", f"a donor trained on {a.ref}'s data ({a.data.dataset})", b.data.dataset)
        common = _settings(s, path, a.data)
        inputs = {side: p.get(f"{side}_inputs", "string", "benign", choices=INPUTS) for side in ("a", "b")}
        if "inverted" in inputs.values() and "adversarial" in inputs.values():
            raise SpecError(ppath, "inverted or adversarial inputs, not both", inputs)
        if inverted is not None:
            common.update(_inversion(inverted, a, f"{path}.inverted", inversions))
        elif "inverted" in inputs.values():
            raise SpecError(f"{path}.inverted", "an inversions entry's name (a pair sees inverted inputs)", None)
        common["svcca_max_k"] = _svcca_cap(s, path, measure, common["images"])  # after `images` is final
        common["mknn_k"] = _measure_option(s, path, measure, "mknn_k", high=max(1, common["images"] - 1))
        attack = _attack(s, path, a, b, donors, evaluation) if "adversarial" in inputs.values() else {}
        used.update(d.name for d in (a, b))
        if attack:
            used.add(attack.pop("_donor"))
        units.append(
            SimilaritySpec(
                a_key=a.donor_key,
                b_key=b.donor_key,
                a_arch=a.arch,
                b_arch=b.arch,
                a_points=points(s.raw.get("points", OPTIONS["points"].default), a.arch, f"{path}.points")
                if on_points
                else (),
                b_points=points(s.raw.get("points", OPTIONS["points"].default), b.arch, f"{path}.points")
                if on_points
                else (),
                measure=measure,
                a_inputs=inputs["a"],
                b_inputs=inputs["b"],
                a=a.ref,
                b=b.ref,
                **attack,
                **common,
            )
        )
    if "attack" in s.raw and not any(u.attack_key for u in units):
        raise SpecError(
            f"{path}.attack",
            "an option of pairs with adversarial inputs",
            s.raw["attack"],
            "no pair sets a_inputs or b_inputs: adversarial",
        )
    return units


def _inversion(name: str, a: DonorSpec, path: str, inversions: tuple) -> dict:
    """The inversion unit of entry `name` that inverts donor A: both sides read its images (the inverted ones,
    or their natural targets), so `images` is its sample size."""
    named = [u for u in inversions if u.name == name]
    if not named:
        known = sorted({u.name for u in inversions if u.name})
        raise SpecError(path, f"the name of an inversions entry: one of {known}", name, did_you_mean(name, known))
    mine = [u for u in named if u.donor_key == a.donor_key and u.trial_id is None]  # A itself, not a stitch
    if not mine:
        hint = "add it to that entry's donors"
        raise SpecError(path, f"an inversions entry that inverts side A ({a.ref})", name, hint)
    return dict(inversion_id=mine[0].unit_id, inverted=name, images=mine[0].images)


def _settings(s: Section, path: str, data) -> dict:
    """The fields every unit of the entry shares: data, images, estimator, seed, label."""
    name = s.read(OPTIONS["name"])
    if name and not NAME_RE.match(name):
        raise SpecError(f"{path}.name", "letters, digits, '_', '-' or '.'", name)
    n_test = data.sizes()[1]
    cka = INDICES[s.read(OPTIONS["measure"])].similarity_by == "cka"
    estimator = s.read(OPTIONS["estimator"]) if cka else None  # saliency: none of the CKA settings
    return dict(
        **data.fields(),
        images=s.read(OPTIONS["images"], default=OPTIONS["images"].capped(n_test), high=n_test),
        estimator=estimator,
        batch_size=s.read(OPTIONS["batch_size"]) if estimator == "minibatch" else None,
        passes=s.read(OPTIONS["passes"]) if estimator == "minibatch" else None,
        seed=s.read(OPTIONS["seed"]),
        name=name,
    )


def _measure_option(s: Section, path: str, measure: str, key: str, high: int) -> int | None:
    """An index option of the entry (`Index.options`), as written (None: unset); refused where the entry's
    measure does not take it (the message names the indices that do)."""
    value = s.read(OPTIONS[key], high=high)
    if key not in INDICES[measure].options and value is not None:
        takes = [n for n in measures() if key in INDICES[n].options]
        raise SpecError(
            f"{path}.{key}", f"null (it applies to measure: {' | '.join(takes)})", value, f"measure: {measure}"
        )
    return value


def _svcca_cap(s: Section, path: str, measure: str, images: int) -> int | None:
    """SVCCA's cap on the directions each side keeps (Raghu et al. 2017 keep 99% of the variance; with 1,000
    flattened images that can be most of the images, and the score then measures k / n): k / n at most 0.1."""
    cap = _measure_option(s, path, measure, "svcca_max_k", high=max(1, int(SVCCA_MAX_RATIO * images)))
    if "svcca_max_k" not in INDICES[measure].options:
        return None
    return max(1, images // SVCCA_IMAGES_PER_K) if cap is None else cap


def _attack(s: Section, path: str, a: DonorSpec, b: DonorSpec, donors: dict, evaluation) -> dict:
    """The adversarial examples' settings: PGD against `source` (a, b or a donor reference)."""
    raw = s.get("attack", "mapping", {})
    at = Section(raw, f"{path}.attack", set(ATTACK_OPTIONS))
    source = at.read(ATTACK_OPTIONS["source"])
    donor = {"a": a, "b": b}.get(source) or resolve_ref(source, f"{path}.attack.source", donors)
    if donor.data.dataset != a.data.dataset:
        raise SpecError(f"{path}.attack.source", f"a donor trained on {a.data.dataset}", donor.data.dataset)
    return dict(attack_key=donor.donor_key, attack_source=donor.ref, _donor=donor.name, **pgd_settings(at, evaluation))
