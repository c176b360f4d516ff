"""A cost model: how long a space's units take, from per-architecture timings measured on one kind of
hardware (a *profile*), refined by the timings a sweep has already recorded. `stitchsweep plan --estimate`.

A profile holds, per architecture and input shape, the seconds per image of a forward pass (eval, no
gradients), of a training step (forward, backward, update), the cumulative share of the forward pass up to
each stitch point and the OOD detector's step and forward at each point; the device's float64 algebra
rates (`sweep.costs.work`); and a fixed cost per unit on a warm worker. `sweep.planning.calibration` measures one on
the machine it runs on (`tests/benchmarks/calibrate.py` writes it); `sweep/planning/profiles/cpu-2core.json`, measured
on the project's 2-core CPU machine, ships as the default, and `nvidia-h200.json` beside it (`--costs
nvidia-h200`: a shipped profile is named without its folder and suffix).

The model counts image passes and prices them:
- donors: epochs x images x step (x (1 + PGD steps) for adversarial training), then each evaluation: test
  images x forward, plus AutoAttack's attacks x iterations x restarts x step on its robust images;
- stitching trials, by phase (`trial_phases`, named as the trial's `time_*_s` columns): DM, K images through
  f<=i and g<=j; gradient objectives, epochs x images through g>j as steps (the front as a forward pass, once
  per (front, point, split) when the worker's cache serves it, else every epoch); adversarial objectives,
  (1 + PGD steps) steps through the whole stitched network; then evaluation as for donors; the indices'
  float64 algebra, counted by each index's work model (`sweep.costs.work`) and priced by the profile's
  `algebra` timings; the OOD detector's training, once per (end donor, point, OOD setting) (its steps and
  forwards per image, timed per stitch point: the profile's `detector`), and each trial's energies (forward
  passes through the detector);
- CKA and representation-test units: their images through every model they read (adversarial inputs as
  PGD steps), a representation test's linear probes and indices' algebra too; saliency units, one step per
  image and model; inversion units, images x (steps + 1) steps up to the inverted point (a stitched network
  priced as its end network).
An architecture of the user's (a plugin's) that the profile does not know is measured here, as calibration
measures a profile's, and scaled to the profile's seconds (`sweep.planning.calibration.measure_here`): the estimate
says so on a line of its own. What a profile still has no timings for is listed ("not priced") and the total is
then a lower bound (a shipped architecture is never measured by `plan`: it would import PyTorch). The wall time
(`sweep.planning.wall`) adds the command's start-up and the workers' start (PyTorch's import, reading the dataset:
the first stage's, and the workers a later stage starts beside the one kept) to the work spread over the
workers. Left out: decoding a streamed image folder (it overlaps the passes in the loader's processes), t-SNE
itself (scikit-learn on the CPU), a receiver's rank after the fit.
A sweep's own recorded timings correct the rest (`refine`). `tests/benchmarks/cost_check.py` checks the prediction
against measured trials (docs/performance.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from sweep.costs.pricer import Pricer
from sweep.costs.work import RATES

PROFILES = Path(__file__).parent / "profiles"
DEFAULT_PROFILE = PROFILES / "cpu-2core.json"


class UnitPrice(NamedTuple):
    """One unit's price: its id, its group (the architectures its price read, `+`-joined), its device-seconds,
    and whether the profile priced all of it (False: a lower bound)."""

    unit: str
    group: str
    seconds: float
    priced: bool


@dataclass
class Estimate:
    """Seconds per kind of work (device-seconds: one unit on its own resources), what the profile lacks."""

    seconds: dict[str, float] = field(default_factory=dict)
    units: dict[str, int] = field(default_factory=dict)
    uncalibrated: set[str] = field(default_factory=set)  # what the profile has no timings for (arch@shape, ...)
    scale: dict[str, float] = field(default_factory=dict)  # kind -> measured / predicted of its recorded units
    per_unit: dict[str, list[UnitPrice]] = field(default_factory=dict)  # kind -> its units' prices, in plan order
    measured: dict[str, str] = field(default_factory=dict)  # shape key measured here -> how (the estimate's line)
    measuring_s: float = 0.0  # the seconds measuring them took (once per process: the first time's)

    @property
    def total(self) -> float:
        return sum(self.seconds.values())


def load_profile(path: str | Path | None = None) -> dict:
    """A profile from a JSON file, or a shipped one by its name (`nvidia-h200`); the 2-core CPU one by default."""
    path = Path(path) if path else DEFAULT_PROFILE
    if not path.exists() and (PROFILES / f"{path}.json").is_file() and path.name == str(path):
        path = PROFILES / f"{path}.json"
    try:
        profile = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        from sweep.config.errors import SpecError

        shipped = ", ".join(sorted(p.stem for p in PROFILES.glob("*.json")))
        expected = f"a cost profile: a JSON file written by tests/benchmarks/calibrate.py, or a shipped one ({shipped})"
        raise SpecError("--costs", expected, str(path), str(exc)) from None
    lacking = [k for k in RATES if k not in profile.get("algebra", dict.fromkeys(RATES))]
    if lacking:
        from sweep.config.errors import SpecError

        raise SpecError("--costs", f"`algebra` timings with {', '.join(RATES)}", f"{path} lacking {', '.join(lacking)}")
    return profile


def estimate(sweep, plan: dict[str, list[str]], profile: dict, cache: bool = True, measure: bool = True) -> Estimate:
    """Device-seconds of the units of `plan` (kind -> unit ids) under `profile`. A plugin's architecture the
    profile has no entry for is measured here first (`measure`; `sweep.planning.calibration.measure_here`, once per
    process) and priced with the measured entry; a shipped one is left unpriced (measuring it would import
    PyTorch, which `plan` never does for shipped architectures)."""
    out, pricer = _priced(sweep, plan, profile, cache)
    todo = {key: shape for key, shape in pricer.unknown.items() if _plugin(shape[0])} if measure else {}
    if not todo:
        return out
    from sweep.planning.calibration import measure_here

    entries, notes, failed, took = measure_here(todo, profile, pricer.wanted)
    if entries:
        out, _ = _priced(sweep, plan, {**profile, "archs": {**profile["archs"], **entries}}, cache)
    out.measured, out.measuring_s = notes, took
    for key, why in failed.items():
        out.uncalibrated.discard(key)
        out.uncalibrated.add(f"{key} (measuring it here failed: {why})")
    return out


def _plugin(arch: str) -> bool:
    """Whether `arch` is registered by the user's code (not a shipped architecture)."""
    from sweep.registry import ARCHITECTURES

    return arch in ARCHITECTURES.names() and not getattr(ARCHITECTURES[arch], "builtin", True)


def _priced(sweep, plan: dict[str, list[str]], profile: dict, cache: bool):
    """The estimate of `plan` with `profile`'s timings as they are, and the `Pricer` (what it lacked)."""
    from sweep.registry import KINDS, resolve

    out = Estimate()
    arch_of = {d.donor_key: d.arch for d in sweep.donors.values() if d.noise_sigma is None}
    p = Pricer(profile, out.uncalibrated, arch_of, cache)
    for name, ids in plan.items():
        kind = KINDS[name]
        if kind.price is None:  # a kind that declares no price
            if ids:
                out.uncalibrated.add(f"{kind.noun} (the kind declares no price)")
            out.seconds[name], out.units[name] = 0.0, len(ids)
            continue
        price, units, rows = resolve(kind.price), kind.units(sweep), []
        for uid in ids:
            p.start()
            seconds = price(units[uid], p)
            rows.append(UnitPrice(uid, "+".join(sorted(p.touched)), seconds, not p.lacking))
        out.per_unit[name] = rows
        out.seconds[name], out.units[name] = sum(r.seconds for r in rows), len(ids)
    return out, p


def unit_prices(sweep, plan: dict[str, list[str]], costs: str | None = None) -> tuple[dict[str, list], float]:
    """What the progress line's ETA starts from: per kind of `plan` that declares a price, its units' prices
    (`UnitPrice`: each with the architectures it reads and whether the profile priced all of it), in the order
    its stage hands them out (`Kind.locality`, as `sweep.backends.ray` sorts them); and the profile's fixed cost
    of a stage. A plugin's architecture the profile lacks is measured here (`estimate`)."""
    from sweep.registry import KINDS

    profile = load_profile(costs)
    est = estimate(sweep, plan, profile)
    for key, how in sorted(est.measured.items()):
        print(f"note: {key} measured here for the ETA ({est.measuring_s:.0f} s; not in the profile): {how}", flush=True)
    prices = {}
    for name, rows in est.per_unit.items():
        kind = KINDS[name]
        if kind.locality:
            units = kind.units(sweep)
            rows = sorted(rows, key=lambda r, kind=kind, units=units: kind.locality(units[r.unit]))
        prices[name] = rows
    return prices, float(profile.get("stage_s", 0.0))


def refine(est: Estimate, sweep, sweep_dir, profile: dict, cache: bool = True) -> Estimate:
    """Scale each kind's prediction by measured / predicted over the units the sweep has recorded (their
    own `time_total_s` / `time_unit_s`): the model's constants meet this sweep's hardware and settings."""
    from sweep.planning.planning import progress

    done = {k: prog.done for k, prog in progress(sweep, sweep_dir).items() if prog.done}
    measured = _recorded_seconds(sweep_dir)
    for name, ids in done.items():
        have = [uid for uid in ids if uid in measured.get(name, {})]
        if not have or name not in est.seconds:
            continue
        predicted = estimate(sweep, {name: have}, profile, cache).seconds[name]
        if predicted > 0:
            ratio = sum(measured[name][u] for u in have) / predicted
            est.scale[name] = ratio
            est.seconds[name] *= ratio
    return est


def _recorded_seconds(sweep_dir) -> dict[str, dict[str, float]]:
    """Kind -> unit id -> its recorded seconds: each kind's `timing` column in its table, keyed by its `key`
    (trials' `time_total_s`, the other units' `time_unit_s`, which their rows share). Kinds without one are not
    used (donors: their table records training and each evaluation apart)."""
    from sweep.registry import KINDS
    from sweep.store.results import part_rows

    out: dict[str, dict[str, float]] = {}
    for name, kind in KINDS.items():
        if kind.timing is None:
            continue
        key, col = kind.key, kind.timing
        seconds: dict[str, float] = {}
        for row in part_rows(sweep_dir.table(kind.table)):
            if row.get("status") == "done" and row.get(key) is not None and row[key] not in seconds:
                seconds[row[key]] = float("nan") if row.get(col) is None else float(row[col])
        if seconds:
            out[name] = seconds
    return out


def plan_estimate(sweep, units: dict, todo: dict | None, sweep_dir, costs: str | None, workers: int | None):
    """`plan --estimate`: the lines for what would run (everything, without a results folder), refined by
    the timings the sweep has recorded."""
    from sweep.config.errors import SpecError

    if workers is not None and workers < 1:
        raise SpecError("--workers", "a whole number >= 1", workers)
    from sweep.planning.wall import default_workers

    profile = load_profile(costs)
    plan = todo if todo is not None else {k: list(u) for k, u in units.items() if u}
    est = estimate(sweep, plan, profile)
    if sweep_dir is not None:
        est = refine(est, sweep, sweep_dir, profile)
    return describe(est, profile, sweep, workers or default_workers(sweep))


def describe(est: Estimate, profile: dict, sweep, workers: int) -> list[str]:
    """The lines `plan --estimate` prints."""
    from sweep.planning.wall import wall_time
    from sweep.registry import KINDS

    name, hardware, when = (profile.get(k, "?") for k in ("name", "hardware", "measured"))
    lines = [f"estimate with the {name} profile ({hardware}, measured {when}):"]
    for kind, secs in est.seconds.items():
        if est.units[kind]:
            scale = (
                f" (x{est.scale[kind]:.2f}: measured / predicted of its recorded units)" if kind in est.scale else ""
            )
            lines.append(f"  {est.units[kind]} {KINDS[kind].noun}: {_hours(secs)} device time{scale}")
    if not any(est.units.values()):
        lines.append("  nothing to run")
    gpus = sweep.gpus_per_trial or 1
    wall = wall_time(est.seconds, est.units, profile, sweep, max(1, workers), est.uncalibrated, est.measuring_s)
    low = " at least (some units are not priced: below)" if est.uncalibrated else ""
    measuring = f", measuring {_hours(wall.measuring)} (below)" if est.measured else ""
    lines.append(
        f"  total: {_hours(est.total)} device time{low}; {_hours(wall.total)} wall time with {wall.workers} worker(s)"
        f" (start-up {_hours(wall.startup)}{measuring}, workers' start over {wall.n_stages} stage(s)"
        f" {_hours(wall.stages)}, work {_hours(wall.work)})"
    )
    if profile.get("device", "cpu") != "cpu":
        lines.append(f"  GPU-hours: {est.total * gpus / 3600:.1f} (gpus_per_trial {gpus})")
    else:
        lines.append("  GPU-hours: not predicted (a CPU profile; calibrate on the GPU: tests/benchmarks/calibrate.py)")
    for key, how in sorted(est.measured.items()):
        lines.append(f"  {key} measured here (not in the profile): {how}")
    if est.uncalibrated:
        lines.append(f"  not priced (no timings in the profile): {', '.join(sorted(est.uncalibrated))}")
    return lines


def _hours(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    days = seconds / 86400
    return f"{seconds / 3600:.1f} h" if days < 2 else f"{seconds / 3600:.0f} h ({days:.1f} days)"
