"""Search space YAML -> validated, expanded, frozen trial specs with stable ids.

The whole space is validated before anything runs: any error is a `SpecError` naming the field, what was
expected and what was found. See docs/search-spaces.md for the format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweep.config.context import SpaceContext
from sweep.config.data import OPTIONS as DATA_OPTIONS
from sweep.config.data import SOURCE_OPTIONS, DataSpec, parse_data
from sweep.config.donors import DonorEval, DonorSpec, parse_donor
from sweep.config.errors import SpecError
from sweep.config.evaluation import EvalSpec, parse_evaluation
from sweep.config.fields import NAME_RE, Option, Section, by_key
from sweep.config.generators import SHARED, expand_space, in_family
from sweep.config.includes import in_file, read_yaml, resolve_includes
from sweep.config.overrides import apply_overrides, overrides_named
from sweep.config.plugins import Plugin, load_plugins, localise
from sweep.config.trial import TrialSpec
from sweep.registry import DATASETS
from sweep.store.storage import Loc

__all__ = ["Sweep", "TrialSpec", "EvalSpec", "load_space", "parse_space"]


@dataclass(frozen=True, kw_only=True)
class Sweep:
    name: str
    data: DataSpec
    evaluation: EvalSpec
    donors: dict[str, DonorSpec]
    # the units of every kind of work whose section the space has, by kind name ("trial", "reptest", ...)
    units: dict[str, tuple]
    cpus_per_trial: float
    gpus_per_trial: float
    raw: dict
    plugins: tuple[Plugin, ...] = ()  # the user's modules, imported before validation (`sweep.config.plugins`)
    memory_per_trial: float | None = None  # GiB (`sweep.planning.memory` sizes the units against it)
    data_root: str | None = None  # where datasets are read from (None: $STITCHSWEEP_DATA or the cache)
    download: bool = True
    # donor name -> the evaluations the zoo stage records for it: its own test set first, then those of the
    # trials it serves (see DonorEval)
    donor_evals: dict = field(default_factory=dict)
    # one line per family, selection and pair generator the space used (`plan` prints them); `raw` is the
    # expanded space, which a run keeps with its results
    generated: tuple[str, ...] = ()

    @property
    def trials(self) -> tuple[TrialSpec, ...]:
        return self.units.get("trial", ())

    @property
    def reptests(self) -> tuple:
        """The representation-test units (`RepTestSpec`)."""
        return self.units.get("reptest", ())


def load_space(
    path: str | Path | Loc, overrides: list[str] | tuple[str, ...] = (), extra: list[str] | tuple = ()
) -> Sweep:
    """Read, validate and expand a search-space YAML file (a local path, or a `Loc` on any storage), with the
    files it includes and the plugins it lists (relative to it), then the command line's `overrides`
    (`sweep.config.overrides`); `extra`: plugins given by `--plugin`."""
    p = path if isinstance(path, Loc) else Path(path)
    if not p.is_file():
        raise SpecError("SPACE", "a search-space YAML file", str(path), "no such file")
    raw = read_yaml(p, str(path))
    if not isinstance(raw, dict):
        raise SpecError(
            str(path),
            "a mapping of search-space fields (name, data, donors, ...)",
            raw if raw is not None else "an empty file",
        )
    read: list[tuple[str, Path]] = []
    if isinstance(p, Path) and "include" in raw:
        raw = resolve_includes(raw, p.parent, str(path), (p.resolve(),), read)
    raw, applied = apply_overrides(raw, overrides)
    raw = with_plugins(raw, extra)
    base = p.parent if isinstance(p, Path) else localise(p.parent, raw.get("plugins"))
    try:
        return parse_space(raw, base)
    except SpecError as err:  # named by the override, or the included file, it comes from
        named = overrides_named(err, applied)
        if named is not err or not read:
            raise named from None
        raise in_file(err, [(str(path), p), *read[::-1]]) from None


RESOURCE_OPTIONS = by_key(
    (
        Option("cpus_per_trial", "number", 1.0, low=0.0),
        Option("gpus_per_trial", "number", 0.0, low=0.0, doc="fractions (0.25) share a GPU"),
        Option(
            "memory_per_trial",
            "number",
            None,
            low=0.0,
            nullable=True,
            doc="GiB a trial may hold: Ray reserves it, and a unit whose measures need more is refused",
        ),
    )
)


def with_plugins(raw: dict, extra: list[str] | tuple) -> dict:
    """`raw` with the `--plugin` arguments added to its `plugins:` (files made absolute: they are relative to
    the working directory, not to the space)."""
    if not extra:
        return raw
    listed = raw.get("plugins") or []
    if not isinstance(listed, list):
        raise SpecError("plugins", "a list of plugins", listed)
    added = [str(Path(e).resolve()) if str(e).endswith(".py") else e for e in extra]
    return {**raw, "plugins": [*listed, *(a for a in added if a not in listed)]}


def parse_space(raw: Any, base: Path | None = None) -> Sweep:
    """Validate a search space given as a mapping and expand it into the units of every kind of work; its
    plugins are imported first (files relative to `base`, default the working directory)."""
    from sweep.registry import KINDS

    if not isinstance(raw, dict):
        raise SpecError("search space", "a mapping of search-space fields (name, data, donors, ...)", raw)
    raw = resolve_includes(raw, Path.cwd(), "search space")
    plugins = load_plugins(raw.get("plugins"), base or Path.cwd())
    sections = {kind.section: kind for kind in KINDS.values() if kind.section}  # the kinds' own sections
    shared = {k for k in raw if str(k).startswith(SHARED)}  # x-...: blocks for anchors, dropped by expansion
    top = Section(raw, "", {"name", "data", "donors", "evaluation", "resources", "plugins", *sections, *shared})
    name = top.get("name", "string")
    if not NAME_RE.match(name):
        raise SpecError("name", "letters, digits, '_', '-' or '.'", name)
    data, root, download = _read_data(top.get("data", "mapping"))
    evaluation = parse_evaluation(top.raw.get("evaluation", {}), DATASETS[data.dataset].threat[0], data.sizes()[1])
    raw, generated, families = expand_space(raw, lambda n, d: parse_donor(n, d, data, evaluation, root, download))
    top = Section(raw, "", set(top.raw))
    donors = _read_donors(top.get("donors", "mapping"), families, data, evaluation, root, download)
    ctx = SpaceContext(data, evaluation, donors, set())
    if not set(sections) & set(raw):  # a donors-only sweep (Balogh & Jelasity 2023 Table 1): every donor
        ctx.used.update(name for name, d in donors.items() if d.network)
    units = ctx.units
    for key, kind in sections.items():
        if key in raw:
            units[kind.name] = tuple(kind.parse(raw[key], ctx))
    r = Section(top.raw.get("resources", {}), "resources", set(RESOURCE_OPTIONS))
    sweep = Sweep(
        donor_evals=_donor_evals(donors, ctx.used, evaluation, units.get("trial", ())),
        name=name,
        data=data,
        evaluation=evaluation,
        donors={k: v for k, v in donors.items() if k in ctx.used},
        units=units,
        cpus_per_trial=r.read(RESOURCE_OPTIONS["cpus_per_trial"]),
        gpus_per_trial=r.read(RESOURCE_OPTIONS["gpus_per_trial"]),
        memory_per_trial=r.read(RESOURCE_OPTIONS["memory_per_trial"]),
        raw=raw,
        plugins=plugins,
        generated=tuple(generated),
        data_root=root,
        download=download,
    )
    return sweep


def _donor_evals(donors: dict, used: set[str], evaluation: EvalSpec, trials: tuple) -> dict:
    """Donor name -> the evaluations the zoo stage records: its own test set, then each trial's images."""
    evals = {n: {DonorEval.of(d.data, evaluation): None} for n, d in donors.items() if n in used and d.network}
    for t in trials:
        for ref, ev in ((t.front, t.front_eval), (t.end, t.end_eval)):
            if ev is not None:  # None: a noise sender, never evaluated
                evals[ref.partition(":")[2]][ev] = None
    return {n: tuple(evs) for n, evs in evals.items()}


def _read_data(d: Any) -> tuple[DataSpec, str | None, bool]:
    """The sweep's data section: the data, and where it lives (root, download)."""
    source = Section(d, "data", set(DATA_OPTIONS) | set(SOURCE_OPTIONS)) if isinstance(d, dict) else None
    root = source.read(SOURCE_OPTIONS["root"]) if source else None
    root = str(Path(root).expanduser().absolute()) if root else None
    download = source.read(SOURCE_OPTIONS["download"]) if source else True
    return parse_data(d, "data", root, download, extra=set(SOURCE_OPTIONS)), root, download


def _donor(name: str, raw: Any, families: dict[str, str], *args) -> DonorSpec:
    """`parse_donor`, its errors about a family's member named at the family's position."""
    try:
        return parse_donor(name, raw, *args)
    except SpecError as err:
        raise in_family(err, name, families) from None


def _read_donors(raw: dict, families: dict, data: DataSpec, evaluation: EvalSpec, root: str | None, download: bool):
    if not raw:
        raise SpecError("donors", "a non-empty mapping of donor name -> training config", raw)
    donors = {dname: _donor(dname, draw, families, data, evaluation, root, download) for dname, draw in raw.items()}
    seen: dict[str, str] = {}
    for dname, donor in donors.items():
        if donor.donor_key in seen:
            same = SpecError(
                f"donors.{dname}",
                "donors that differ in what shapes their weights",
                f"the same donor as donors.{seen[donor.donor_key]}",
                f"use one name for it: {seen[donor.donor_key]} or {dname}",
            )
            raise in_family(same, dname, families)
        seen[donor.donor_key] = dname
        if donor.data.sizes()[1] < evaluation.n_eval_robust:
            raise SpecError(
                "evaluation.n_eval_robust",
                f"at most the {donor.data.sizes()[1]} test images of donor {dname}'s data",
                evaluation.n_eval_robust,
            )
    return donors
