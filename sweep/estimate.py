"""A cost model: how long a space's units take, from per-architecture timings measured on one kind of
hardware (a *profile*), refined by the timings a sweep has already recorded. `stitchsweep plan --estimate`.

A profile holds, per architecture and input shape, the seconds per image of a forward pass (eval, no
gradients), of a training step (forward, backward, update) and the cumulative share of the forward pass
up to each stitch point, plus a fixed cost per unit on a warm worker. `calibrate` measures one on the
machine it runs on (`tests/benchmarks/calibrate.py` writes it); `sweep/profiles/cpu-2core.json`, measured on
the project's 2-core CPU machine, ships as the default, and `nvidia-h200.json` beside it (`--costs
nvidia-h200`: a shipped profile is named without its folder and suffix).

The model counts image passes and prices them:
- donors: epochs x images x step (x (1 + PGD steps) for adversarial training), then each evaluation: test
  images x forward, plus AutoAttack's attacks x iterations x restarts x step on its robust images;
- stitching trials: DM, K images through f<=i and g<=j; gradient objectives, epochs x images through g>j
  as steps (the front as a forward pass, once per (front, point, split) when the worker's cache serves it,
  else every epoch); adversarial objectives, (1 + PGD steps) steps through the whole stitched network;
  then evaluation as for donors, indices and OOD as forward passes;
- CKA and representation-test units: their images through every model they read (adversarial inputs as
  PGD steps); saliency units, one step per image and model; inversion units, images x (steps + 1) steps
  up to the inverted point (a stitched network priced as its end network).
What it leaves out (the indices' own linear algebra, probes, OOD detector training) is small next to these
at paper scale on a CPU; on a GPU, computed on the host, the indices dominated a DM trial (docs/performance.md),
so a GPU prediction is a lower bound. A sweep's own recorded timings correct the rest (`refine`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

PROFILES = Path(__file__).parent / "profiles"
DEFAULT_PROFILE = PROFILES / "cpu-2core.json"


@dataclass
class Estimate:
    """Seconds per kind of work (device-seconds: one unit on its own resources), what the profile lacks."""

    seconds: dict[str, float] = field(default_factory=dict)
    units: dict[str, int] = field(default_factory=dict)
    uncalibrated: set[str] = field(default_factory=set)  # architecture@shape with no timings in the profile
    scale: dict[str, float] = field(default_factory=dict)  # kind -> measured / predicted of its recorded units

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
    return profile


def shape_key(arch: str, channels: int, image_size: int) -> str:
    return f"{arch}@{channels}x{image_size}"


class Pricer:
    """Prices image passes of one architecture on one input shape with a profile's timings."""

    def __init__(self, profile: dict, missing: set[str]) -> None:
        self.archs = profile["archs"]
        self.unit_s = float(profile.get("unit_s", 0.0))
        self.missing = missing

    def _entry(self, arch: str, dataset: str) -> dict | None:
        from sweep.registry import DATASETS

        info = DATASETS[dataset]
        key = shape_key(arch, info.channels, info.image_size)
        entry = self.archs.get(key)
        if entry is None:
            self.missing.add(key)
        return entry

    def forward(self, arch: str, dataset: str, images: float, upto: str | None = None, after: str | None = None):
        """Seconds of forward passes of `images` through the whole network, or through its stages up to
        and including `upto`, or after `after`."""
        e = self._entry(arch, dataset)
        if e is None:
            return 0.0
        return images * e["forward_s"] * _share(e, upto, after)

    def step(self, arch: str, dataset: str, images: float, after: str | None = None, upto: str | None = None):
        """Seconds of training steps (a forward and a backward) of `images`, of the whole network or of the
        stages after `after` / up to `upto`."""
        e = self._entry(arch, dataset)
        if e is None:
            return 0.0
        return images * e["step_s"] * _share(e, upto, after)


def _share(entry: dict, upto: str | None, after: str | None) -> float:
    shares = entry["share"]
    if upto is not None:
        return shares.get(upto, 1.0)
    if after is not None:
        return max(0.0, 1.0 - shares.get(after, 0.0))
    return 1.0


def _sizes(dataset: str, train: int | None, val: int, test: int | None) -> tuple[int, int, int]:
    from sweep.registry import DATASETS

    info = DATASETS[dataset]
    return (info.train_pool - val if train is None else train), val, (info.test if test is None else test)


# AutoAttack's standard version per image, at most: APGD-CE 100 steps, APGD-T and FAB-T 9 targets x 100, Square
# 5,000 queries (forward passes); it attacks only the images still robust, so this is an upper bound
STANDARD_STEPS, STANDARD_QUERIES = 1900, 5000


def _attack(p: Pricer, arch: str, dataset: str, n: int, attacks, iterations: int, restarts: int) -> float:
    """AutoAttack on `n` images: each attack's iterations (and restarts) as steps (a forward and a backward);
    `standard`: its own budget (`STANDARD_STEPS` steps and `STANDARD_QUERIES` forward passes per image)."""
    if not n:
        return 0.0
    if tuple(attacks) == ("standard",):
        return p.step(arch, dataset, n * STANDARD_STEPS) + p.forward(arch, dataset, n * STANDARD_QUERIES)
    return p.step(arch, dataset, n * len(attacks) * iterations * restarts)


def donor_seconds(work, p: Pricer) -> float:
    d = work.donor
    secs = 0.0
    if d.source == "zoo" and d.noise_sigma is None:
        train, _, _ = _sizes(d.data.dataset, d.data.train_size, d.data.val_size, d.data.test_size)
        passes = 1 + (d.steps or 0) if d.training not in (None, "plain") else 1
        secs += p.step(d.arch, d.data.dataset, (d.epochs or 0) * train * passes)
    if d.noise_sigma is not None:
        return p.unit_s
    for ev in work.evaluations:
        robust = _attack(p, d.arch, ev.dataset, ev.n_eval_robust, ev.attacks, ev.iterations, ev.restarts)
        secs += p.forward(d.arch, ev.dataset, ev.test_size) + robust
    return secs + p.unit_s


def trial_seconds(spec, p: Pricer, arch_of: dict, fills: set | None = None) -> float:
    """One stitching trial. `fills`: the (front, point, split) whose activations a worker has already
    computed in this sweep (the cache serves the rest); None: no cache."""
    from sweep.stitching.objectives import OBJECTIVES

    train, val, test = _sizes(spec.dataset, spec.train_size, spec.val_size, spec.test_size)
    fa, ea, ds = arch_of.get(spec.front_key), arch_of[spec.end_key], spec.dataset
    front = (lambda n: p.forward(fa, ds, n, upto=spec.front_point)) if fa else (lambda n: 0.0)
    secs = p.unit_s
    frozen = fills is not None and spec.noise_sigma is None and spec.donor_bn != "update"
    key = (spec.front_key, spec.front_point, spec.dataset, train, val, test)
    if frozen and key not in fills:  # the cache's one pass over the split
        fills.add(key)
        secs += front(train + val + test)
    obj = spec.objective
    if obj == "dm" or OBJECTIVES[obj].dm_init or spec.init == "dm":
        k = spec.dm_samples or 0
        secs += (0 if frozen else front(k)) + p.forward(ea, ds, k, upto=spec.end_point)
    if obj != "dm":
        epochs = spec.epochs or 0
        adversarial = spec.adv_steps is not None and obj != "tlm" and obj != "dm+tlm"
        if adversarial:  # PGD through the whole stitched network, every batch
            secs += epochs * p.step(ea, ds, train * (1 + spec.adv_steps))
        else:
            secs += epochs * p.step(ea, ds, train, after=spec.end_point)
            secs += epochs * p.forward(ea, ds, val, after=spec.end_point)
            secs += 0 if frozen else epochs * (front(train) + front(val))
    secs += p.forward(ea, ds, test, after=spec.end_point) + (0 if frozen else front(test))
    secs += _attack(p, ea, ds, spec.n_eval_robust, spec.attacks, spec.attack_iterations, spec.attack_restarts)
    if spec.indices and not frozen:
        n = spec.similarity_samples or 0
        secs += front(n) + p.forward(ea, ds, n, upto=spec.end_point)
    if spec.ood_outliers:
        n = spec.ood_samples or 0
        secs += p.forward(ea, ds, 2 * n + (spec.ood_train_size or 0), upto=spec.end_point)
    return secs


def _other_seconds(name: str, unit, p: Pricer) -> float:
    """CKA, saliency, training-similarity, representation-test and inversion units: their images through each
    model they read (an inversion: a forward and a backward through the donor up to its point per step)."""
    ds = unit.dataset
    if name == "similarity" and unit.measure == "saliency":
        return p.unit_s + p.step(unit.a_arch, ds, unit.images) + p.step(unit.b_arch, ds, unit.images)
    if name == "tsne":  # the forward passes; t-SNE itself (scikit-learn, on the CPU) is not priced
        return p.unit_s + p.forward(unit.arch, ds, unit.images)
    if name == "inversion":
        return p.unit_s + p.step(unit.arch, ds, unit.images * (unit.steps + 1), upto=unit.point)
    if name == "similarity":
        images = unit.images * (unit.passes or 1)
        adv = (unit.attack_steps or 0) if "adversarial" in (unit.a_inputs, unit.b_inputs) else 0
        return (
            p.unit_s
            + p.forward(unit.a_arch, ds, images)
            + p.forward(unit.b_arch, ds, images)
            + (p.step(unit.a_arch, ds, images * adv) if adv else 0.0)
        )
    if name == "training_similarity":
        images = unit.images * unit.passes * len(unit.epochs)
        adv = unit.attack_steps or 0 if unit.inputs == "adversarial" else 0
        return p.unit_s + p.forward(unit.arch, ds, images) + p.step(unit.arch, ds, images * adv)
    if name == "reptest":
        images = unit.samples + unit.probe_train_size
        return p.unit_s + len(unit.members) * p.forward(unit.arch, ds, images, upto=unit.members[0][2])
    return p.unit_s


def estimate(sweep, plan: dict[str, list[str]], profile: dict, cache: bool = True) -> Estimate:
    """Device-seconds of the units of `plan` (kind -> unit ids) under `profile`."""
    from sweep.registry import KINDS

    out = Estimate()
    p = Pricer(profile, out.uncalibrated)
    arch_of = {d.donor_key: d.arch for d in sweep.donors.values() if d.noise_sigma is None}
    fills: set | None = set() if cache else None
    for name, ids in plan.items():
        units = KINDS[name].units(sweep)
        total = 0.0
        for uid in ids:
            unit = units[uid]
            if name == "donor":
                total += donor_seconds(unit, p)
            elif name == "trial":
                total += trial_seconds(unit, p, arch_of, fills)
            else:
                total += _other_seconds(name, unit, p)
        out.seconds[name], out.units[name] = total, len(ids)
    return out


def refine(est: Estimate, sweep, sweep_dir, profile: dict, cache: bool = True) -> Estimate:
    """Scale each kind's prediction by measured / predicted over the units the sweep has recorded (their
    own `time_total_s` / `time_unit_s`): the model's constants meet this sweep's hardware and settings."""
    from sweep.planning import progress

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
    """Kind -> unit id -> its recorded seconds: trials' `time_total_s`, the other units' `time_unit_s` (their
    rows share it). Donors are not used: their table records training and each evaluation apart."""
    import analysis

    out: dict[str, dict[str, float]] = {}
    tables = {
        "trial": (analysis.load_trials, "trial_id", "time_total_s"),
        "reptest": (analysis.load_reptests, "unit_id", "time_unit_s"),
        "similarity": (analysis.load_similarity, "unit_id", "time_unit_s"),
        "inversion": (lambda path: analysis.load(path)["inversions"], "unit_id", "time_unit_s"),
    }
    for kind, (load, key, col) in tables.items():
        try:
            table = load(sweep_dir.path)
        except Exception:  # nothing recorded yet
            continue
        if col in table and key in table and len(table):
            done = table[table["status"] == "done"].drop_duplicates(key)
            out[kind] = dict(zip(done[key], done[col].astype(float)))
    return out


def plan_estimate(sweep, units: dict, todo: dict | None, sweep_dir, costs: str | None, workers: int | None):
    """`plan --estimate`: the lines for what would run (everything, without a results folder), refined by
    the timings the sweep has recorded."""
    from sweep.config.errors import SpecError

    if workers is not None and workers < 1:
        raise SpecError("--workers", "a whole number >= 1", workers)
    profile = load_profile(costs)
    plan = todo if todo is not None else {k: list(u) for k, u in units.items() if u}
    est = estimate(sweep, plan, profile)
    if sweep_dir is not None:
        est = refine(est, sweep, sweep_dir, profile)
    return describe(est, profile, sweep, workers or 1)


def describe(est: Estimate, profile: dict, sweep, workers: int) -> list[str]:
    """The lines `plan --estimate` prints."""
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
    wall = est.total / max(1, workers)
    low = " at least (some units are not priced: below)" if est.uncalibrated else ""
    lines.append(f"  total: {_hours(est.total)} device time{low}; {_hours(wall)} wall time on {workers} worker(s)")
    if profile.get("device", "cpu") != "cpu":
        lines.append(f"  GPU-hours: {est.total * gpus / 3600:.1f} (gpus_per_trial {gpus})")
    else:
        lines.append("  GPU-hours: not predicted (a CPU profile; calibrate on the GPU: tests/benchmarks/calibrate.py)")
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


def calibrate(shapes: list[tuple[str, int, int]], device: str = "cpu", batch: int = 128, repeats: int = 3) -> dict:
    """Measure forward and training-step seconds per image and the forward share up to each stage for
    every (architecture, channels, image size), on `device`. Returns the profile's "archs" mapping."""
    import time

    import torch

    from sweep.models.base import build

    dev = torch.device(device)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    out = {}
    for arch, channels, size in shapes:
        model = build(arch, channels, 10, (0.5,), (0.5,), image_size=size).to(dev)
        x = torch.rand(batch, channels, size, size, device=dev)
        y = torch.randint(0, 10, (batch,), device=dev)
        model.eval()
        stage_s = [math.inf] * len(model.stage_names)
        with torch.no_grad():
            for _ in range(repeats + 1):  # the first pass warms up
                h = x
                for i, name in enumerate(model.stage_names):
                    sync()
                    t0 = time.perf_counter()
                    h = model.stage(name)(h)
                    sync()
                    stage_s[i] = min(stage_s[i], time.perf_counter() - t0)
        forward = sum(stage_s)
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        step = math.inf
        for _ in range(repeats + 1):
            sync()
            t0 = time.perf_counter()
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            sync()
            step = min(step, time.perf_counter() - t0)
        cumulative, share = 0.0, {}
        for name, s in zip(model.stage_names, stage_s):
            cumulative += s
            share[name] = round(cumulative / forward, 4)
        out[shape_key(arch, channels, size)] = {
            "forward_s": forward / batch,
            "step_s": step / batch,
            "share": {k: v for k, v in share.items() if k in model.stitch_points or k in model.extra_points},
        }
    return out
