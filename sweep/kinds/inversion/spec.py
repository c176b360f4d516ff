"""The `inversions` section: representation inversion (Jones et al. 2022 Eq. 2; Balogh & Jelasity 2023 Eq. 3
and Appendix C).

Each entry lists donors; a donor is one unit: the inverse, at one point (default `penultimate`), of a fixed
random sample of `images` test images of the data it trained on, by the recipe's normalised-gradient descent
(`sweep.measures.inversion`). `recipe` fills the fields left out: `jones` (seed image of another label, 2,000
steps of 1/8, L2 momentum 0.9) or `engstrom` (grey-plus-noise seed, 10,000 steps of 1, L2 ball of 1000). A
named entry's inverted images are a dataset other sections can read (`similarity`: `inverted: NAME`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from sweep.config.donors import DonorUnit, resolve_ref
from sweep.config.errors import SpecError
from sweep.config.fields import NAME_RE, Option, Section, by_key, check_value, stable_hash
from sweep.registry import ARCHITECTURES, DATASETS, did_you_mean
from sweep.store.inverted import DTYPES
from sweep.store.schema import SCHEMA_VERSION

# the published recipes (sweep.measures.inversion's module doc): the defaults of the fields left out
RECIPE_DEFAULTS = {
    "jones": dict(start="other_image", steps=2000, step_size=0.125, momentum=0.9, eps=1000.0),
    "engstrom": dict(start="grey_noise", steps=10000, step_size=1.0, momentum=0.0, eps=1000.0),
}
RECIPES = tuple(RECIPE_DEFAULTS)
STARTS = ("other_image", "grey_noise")  # a test image of another label | grey plus noise / 20

OPTIONS = by_key(
    (
        Option("name", "string", "", doc="a label; names the inverted dataset other sections read"),
        Option("donors", "string", None, nullable=True, many=True, refs=True, doc="donor REFs: one unit each"),
        Option("stitched", "mapping", None, nullable=True, many=True, doc="[SELECT]: stitched networks, one unit each"),
        Option("point", "string", "penultimate", doc="the representation inverted: a point of each donor"),
        Option("recipe", "string", "jones", choices=RECIPES, doc="jones | engstrom: the defaults below"),
        Option("start", "string", None, choices=STARTS, nullable=True, derived=True, doc="null: the recipe's"),
        Option("steps", "integer", None, low=0, nullable=True, derived=True, doc="null: the recipe's"),
        Option("step_size", "number", None, low=0.0, nullable=True, derived=True, doc="null: the recipe's"),
        Option("momentum", "number", None, low=0.0, high=0.999, nullable=True, derived=True, doc="null: recipe's"),
        Option("eps", "number", None, low=0.0, nullable=True, derived=True, doc="null: recipe's; L2, around the seed"),
        Option("images", "integer", 100, low=1, cap="test", doc="a fixed random sample of N test images"),
        Option("batch_size", "integer", 100, low=1, doc="images inverted at once (no effect on the result)"),
        Option("seed", "integer", 0, low=0, doc="draws the sample, the seed images and the noise"),
        Option("dtype", "string", "float32", choices=DTYPES, doc="the stored images: float32 | float16 | uint8"),
    )
)


@dataclass(frozen=True, kw_only=True)
class InversionSpec(DonorUnit):
    """One unit: one donor's inversion of one image sample. `unit_id` hashes every field that changes the
    inverted images (the donor by its key; not the batch size)."""

    point: str
    recipe: str
    start: str
    steps: int
    step_size: float
    momentum: float
    eps: float
    images: int
    seed: int = 0
    dtype: str = "float32"  # how the inverted images are stored (`sweep.store.inverted`): the rows read them
    trial_id: str | None = None  # a stitched network: the trial whose stitcher it uses (donor_key: its end)
    batch_size: int = field(default=100, compare=False)
    donor: str = field(default="", compare=False)  # the donor's reference (or the stitched network's): a label
    name: str = field(default="", compare=False)
    trial: Any = field(default=None, compare=False)  # that trial's TrialSpec

    LABELS = ("batch_size", "donor", "name", "trial")

    @property
    def unit_id(self) -> str:
        fields = {k: v for k, v in dataclasses.asdict(self).items() if k not in self.LABELS}
        if self.trial_id is None:  # a donor's inversion: the id it had before stitched networks could be inverted
            fields.pop("trial_id")
        if self.dtype == "float32":  # the images' storage type, added later: unset, the old ids hold
            fields.pop("dtype")
        return stable_hash({"kind": "inversion", "v": SCHEMA_VERSION, **fields})

    @property
    def label(self) -> str:
        name = f"{self.name}: " if self.name else ""
        return f"{name}invert {self.donor} @{self.point} ({self.recipe}, {self.steps} steps, {self.images} images)"


def parse_inversions(raw: Any, donors: dict, used: set[str], trials: tuple = ()) -> tuple:
    """Every unit of the `inversions` section (a list of entries, or one entry); `trials`: the space's
    stitching trials, which `stitched` selects from."""
    entries = raw if isinstance(raw, list) else [raw]
    if not entries or not all(isinstance(e, dict) for e in entries):
        raise SpecError("inversions", "a mapping, or a non-empty list of mappings", raw)
    units: dict[str, InversionSpec] = {}
    names: set[str] = set()
    for i, entry in enumerate(entries):
        path = "inversions" if isinstance(raw, dict) else f"inversions[{i}]"
        found = _parse_entry(entry, path, donors, used, trials)
        name = found[0].name
        if name in names:
            raise SpecError(f"{path}.name", "a name no other inversions entry has", name)
        names |= {name} - {""}
        for unit in found:
            units.setdefault(unit.unit_id, unit)
    return tuple(units.values())


def _parse_entry(entry: dict, path: str, donors: dict, used: set[str], trials: tuple) -> list[InversionSpec]:
    s = Section(entry, path, set(OPTIONS))
    name = s.read(OPTIONS["name"])
    if name and not NAME_RE.match(name):
        raise SpecError(f"{path}.name", "letters, digits, '_', '-' or '.'", name)
    recipe = s.read(OPTIONS["recipe"])
    settings = {k: s.read(OPTIONS[k]) for k in RECIPE_DEFAULTS[recipe]}
    settings = {k: RECIPE_DEFAULTS[recipe][k] if v is None else v for k, v in settings.items()}
    point = s.read(OPTIONS["point"])
    refs, selectors = s.raw.get("donors"), s.raw.get("stitched")
    if not refs and not selectors:
        raise SpecError(f"{path}.donors", "a non-empty list of donor references (or stitched: [...])", refs)
    if refs is not None and (not isinstance(refs, list) or not refs):
        raise SpecError(f"{path}.donors", "a non-empty list of donor references", refs)
    common = dict(recipe=recipe, **settings, seed=s.read(OPTIONS["seed"]), batch_size=s.read(OPTIONS["batch_size"]))
    common["dtype"] = s.read(OPTIONS["dtype"])
    units = []
    for k, ref in enumerate(refs or []):
        donor = resolve_ref(check_value(ref, f"{path}.donors[{k}]", "string"), f"{path}.donors[{k}]", donors)
        if not donor.network:
            raise SpecError(f"{path}.donors[{k}]", "a network (a noise sender has no representation)", ref)
        valid = ARCHITECTURES[donor.arch].points()
        if point not in valid:
            hint = did_you_mean(point, valid)
            raise SpecError(f"{path}.point", f"a point of {donor.arch}: one of {valid}", point, hint)
        n_test = donor.data.sizes()[1]
        images = s.read(OPTIONS["images"], default=OPTIONS["images"].capped(n_test), high=n_test)
        used.add(donor.name)
        units.append(
            InversionSpec(
                **DonorUnit.of(donor),
                point=point,
                **common,
                images=images,
                donor=donor.ref,
                name=name,
            )
        )
    return units + [
        _stitched_unit(sel, f"{path}.stitched[{k}]", point, trials, donors, s, dict(common, name=name))
        for k, sel in _list(selectors, f"{path}.stitched")
    ]


# selector field -> the TrialSpec field it matches
SELECT = {
    "front": "front",
    "end": "end",
    "point": "front_point",
    "end_point": "end_point",
    "objective": "objective",
    "alpha": "alpha",
    "beta": "beta",
    "seed": "seed",
    "init": "init",
    "data": "stitch_data",
}


def _list(selectors: Any, path: str) -> list[tuple[int, Any]]:
    if selectors is None:
        return []
    if not isinstance(selectors, list) or not selectors:
        raise SpecError(path, "a non-empty list of trial selectors {front, end, point, objective, ...}", selectors)
    return list(enumerate(selectors))


def _stitched_unit(sel: Any, where: str, point: str, trials: tuple, donors: dict, s: Section, common: dict):
    """The unit inverting the stitched network of the one trial that selector `sel` picks."""
    Section(sel, where, set(SELECT))
    picked = [t for t in trials if all(getattr(t, SELECT[key]) == value for key, value in sel.items())]
    if len(picked) != 1:
        hint = "add fields to pick one" if picked else "the stitching section must hold that trial"
        found = f"{len(picked)} trials match"
        raise SpecError(where, "a selector matching exactly one stitching trial of this space", found, hint)
    trial = picked[0]
    if trial.noise_sigma is not None:
        raise SpecError(where, "a trial whose sender is a network (noise cannot be inverted)", trial.front)
    arch = resolve_ref(trial.end, f"{where}.end", donors).arch
    valid = ARCHITECTURES[arch].points()
    after = valid[valid.index(trial.end_point) :]
    if point not in after:
        raise SpecError(f"{s.path}.point", f"a point of the end network at or after the stitch: one of {after}", point)
    n_test = DATASETS[trial.dataset].test if trial.test_size is None else trial.test_size
    images = s.read(OPTIONS["images"], default=OPTIONS["images"].capped(n_test), high=n_test)
    how = trial.objective + (f" alpha={trial.alpha:g}" if trial.alpha is not None else "")
    label = f"{trial.front} @{trial.front_point} -[{how}]-> {trial.end} @{trial.end_point}"
    return InversionSpec(
        **{f: getattr(trial, f) for f in ("dataset", "train_size", "val_size", "test_size")},
        donor_key=trial.end_key,
        arch=arch,
        point=point,
        **common,
        images=images,
        trial_id=trial.trial_id,
        trial=trial,
        donor=label,
    )
