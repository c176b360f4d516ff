"""What each unit of work costs under a cost profile (`sweep.plan.estimate`): image passes through the networks
priced per architecture and input shape (`Pricer`), the indices' float64 algebra (`sweep.plan.index_costs`), OOD
detectors and linear probes. The model and what it leaves out are described in `sweep.plan.estimate`."""

from __future__ import annotations

import math

from sweep.registry import INDICES


def shape_key(arch: str, channels: int, image_size: int) -> str:
    return f"{arch}@{channels}x{image_size}"


class Pricer:
    """Prices image passes of one architecture on one input shape with a profile's timings. Per unit priced
    (`start`), it notes the architectures the price read (`touched`) and whether it lacked timings (`lacking`);
    over the estimate, the shapes the profile does not know (`unknown`) and the OOD detectors asked of each."""

    def __init__(self, profile: dict, missing: set[str], arch_of: dict | None = None, cache: bool = True) -> None:
        self.archs = profile["archs"]
        self.unit_s = float(profile.get("unit_s", 0.0))
        self.rates = profile.get("algebra")  # float64 algebra, seconds per operation (`sweep.plan.index_costs`)
        self.missing = missing
        # what one estimate's units share (`trial_price`): the donors' architectures by key, the worker
        # cache's fills (None: no cache), the OOD detectors already trained
        self.arch_of = arch_of or {}
        self.fills: dict | None = {} if cache else None
        self.detectors: set = set()
        self.unknown: dict[str, tuple[str, int, int]] = {}  # shape key -> (arch, channels, image size)
        self.wanted: dict[str, set[str]] = {}  # shape key -> the OOD detector kinds priced on it
        self.start()

    def start(self) -> None:
        """A new unit is priced: what it reads and lacks is noted afresh."""
        self.touched: set[str] = set()
        self.lacking = False

    def lack(self, what: str) -> None:
        """`what` has no timings: listed as not priced, and the unit's price is a lower bound."""
        self.missing.add(what)
        self.lacking = True

    def _entry(self, arch: str, dataset: str) -> dict | None:
        shape = _shape(dataset)
        key = shape_key(arch, *shape)
        self.touched.add(arch)
        entry = self.archs.get(key)
        if entry is None:
            self.unknown[key] = (arch, *shape)
            self.lack(key)
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

    def algebra(self, work) -> float:
        """Seconds of float64 algebra (`sweep.plan.index_costs.Work`) at the profile's rates."""
        if self.rates is None:
            self.lack("the indices' algebra (no `algebra` timings)")
            return 0.0
        return work.seconds(self.rates)

    def detector(self, arch: str, dataset: str, point: str, kind: str, steps: float, forwards: float) -> float:
        """Seconds of `steps` training steps and `forwards` forward passes (images) of the `kind` OOD detector
        on `arch`'s activations at `point`."""
        key = shape_key(arch, *_shape(dataset))
        self.wanted.setdefault(key, set()).add(kind)
        e = self._entry(arch, dataset)
        if e is None:
            return 0.0
        timed = e.get("detector", {}).get(kind, {}).get(point)
        if timed is None:
            self.lack(f"the {kind} OOD detector of {key} at {point}" if kind in e.get("detector", {})
                      else f"the {kind} OOD detector of {key}")  # fmt: skip
            return 0.0
        return steps * timed["step_s"] + forwards * timed["forward_s"]


def _shape(dataset: str) -> tuple[int, int]:
    from sweep.registry import DATASETS

    info = DATASETS[dataset]
    return info.channels, info.image_size


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
    for f in work.fills if p.fills is not None else ():  # the evaluation's pass fills them (`sweep.worker.feed`)
        sizes = _sizes(*f.data)
        p.fills[(d.donor_key, f.point, f.data[0], sizes, "test")] = sizes[2]
    for ev in work.evaluations:
        robust = _attack(p, d.arch, ev.dataset, ev.n_eval_robust, ev.attacks, ev.iterations, ev.restarts)
        secs += p.forward(d.arch, ev.dataset, ev.test_size) + robust
    return secs + p.unit_s


PHASES = ("setup", "similarity", "fit", "eval_clean", "eval_robust", "ood")  # a trial's `time_{phase}_s` columns


def trial_seconds(spec, p: Pricer, arch_of: dict, fills: dict | None = None, detectors: set | None = None) -> float:
    """One stitching trial: the sum of its phases (`trial_phases`)."""
    return sum(trial_phases(spec, p, arch_of, fills, detectors).values())


CHUNK = 250  # `sweep.worker.activations.CHUNK`: the frozen halves are computed and kept in chunks of this many images


class _Halves:
    """The frozen halves' activations a trial reads, f<=i (`front`) and g<=j (`end`). With the worker's cache
    (`fills`: (donor, point, split) -> images computed so far in this sweep) each is computed once, chunk by
    chunk as far as the units read it (`sweep.worker.activations.Frozen`); without it (None), or when the fit moves
    the donors' statistics, every read is a forward pass."""

    def __init__(self, spec, p: Pricer, arch_of: dict, fills: dict | None) -> None:
        self.spec, self.p, self.fills = spec, p, fills
        self.sizes = _sizes(spec.dataset, spec.train_size, spec.val_size, spec.test_size)
        self.halves = {
            "front": (spec.front_key, arch_of.get(spec.front_key), spec.front_point),
            "end": (spec.end_key, arch_of[spec.end_key], spec.end_point),
        }
        self.frozen = fills is not None and spec.noise_sigma is None and spec.donor_bn != "update"

    def read(self, half: str, split: str, n: int) -> float:
        """Seconds to give the first `n` images of `split` through `half` (a noise sender's front: none)."""
        key, arch, point = self.halves[half]
        if arch is None or not n:
            return 0.0
        if not self.frozen:
            return self.p.forward(arch, self.spec.dataset, n, upto=point)
        size = self.sizes[("train", "val", "test").index(split)]
        need = min(size, math.ceil(n / CHUNK) * CHUNK)
        where = (key, point, self.spec.dataset, self.sizes, split)
        have = self.fills.get(where, 0)
        if need <= have:
            return 0.0
        self.fills[where] = need
        return self.p.forward(arch, self.spec.dataset, need - have, upto=point)


def trial_phases(spec, p: Pricer, arch_of: dict, fills: dict | None = None, detectors: set | None = None) -> dict:
    """One stitching trial's seconds by phase (`PHASES`), in the order the trial runs them: the unit's fixed
    cost; the indices; the fit; the evaluation; the OOD AUROC. Each phase pays for the frozen halves'
    activations it is the first to read (`_Halves`; `fills`: None, no cache). `detectors`: the OOD detectors
    already trained in this sweep (the zoo keeps them)."""
    from sweep.registry import OBJECTIVES

    train, val, test = _sizes(spec.dataset, spec.train_size, spec.val_size, spec.test_size)
    ea, ds = arch_of[spec.end_key], spec.dataset
    h = _Halves(spec, p, arch_of, fills)
    t = dict.fromkeys(PHASES, 0.0)
    t["setup"] = p.unit_s
    k = spec.dm_samples or 0
    if spec.indices:
        n = spec.similarity_samples or 0
        t["similarity"] = h.read("front", "test", n) + h.read("end", "test", n)
        if "dm" in spec.indices:  # the DM distance's map, fitted on the K training images
            t["similarity"] += h.read("front", "train", k) + h.read("end", "train", k)
        t["similarity"] += p.algebra(_work(spec, arch_of.get(spec.front_key), ea, "indices", k))
    obj = spec.objective
    if obj == "dm" or OBJECTIVES[obj].dm_init or spec.init == "dm":
        fit_k = train if spec.dm_samples is None else min(spec.dm_samples, train)  # None: every training image
        t["fit"] += h.read("front", "train", fit_k) + h.read("end", "train", fit_k)
        t["fit"] += p.algebra(_work(spec, arch_of.get(spec.front_key), ea, "direct_match", fit_k))
    if obj != "dm":
        epochs = spec.epochs or 0
        adversarial = spec.adv_steps is not None and obj != "tlm" and obj != "dm+tlm"
        if adversarial:  # PGD through the whole stitched network, every batch
            t["fit"] += epochs * p.step(ea, ds, train * (1 + spec.adv_steps))
        else:
            t["fit"] += epochs * p.step(ea, ds, train, after=spec.end_point)
            t["fit"] += epochs * p.forward(ea, ds, val, after=spec.end_point)
            for _ in range(1 if h.frozen else epochs):
                t["fit"] += h.read("front", "train", train) + h.read("front", "val", val)
    t["eval_clean"] = p.forward(ea, ds, test, after=spec.end_point) + h.read("front", "test", test)
    attack = _attack(p, ea, ds, spec.n_eval_robust, spec.attacks, spec.attack_iterations, spec.attack_restarts)
    t["eval_robust"] = attack
    if spec.ood_outliers:
        t["ood"] = _ood_seconds(spec, p, ea, h, detectors)
    return t


def _work(spec, front_arch: str | None, end_arch: str, what: str, k: int):
    """The float64 work of a trial's `indices` or of its `direct_match` fit, with K = `k` fit images (a noise
    sender: its samples, shaped as the target)."""
    from sweep.config.shapes import activation_shape
    from sweep.plan.index_costs import direct_match_work, pair_work
    from sweep.plan.memory import ShapePair

    target = activation_shape(end_arch, spec.dataset, spec.end_point)
    sender = activation_shape(front_arch, spec.dataset, spec.front_point) if front_arch else target
    pair = ShapePair(sender, target, {"pwcca": spec.pwcca_layout, "opd": spec.opd_layout})
    if what == "direct_match":
        return direct_match_work(pair, k)
    return pair_work(pair, spec.indices, spec.similarity_samples or 0, k, spec.permutations)


def _ood_seconds(spec, p: Pricer, end_arch: str, h: _Halves, detectors: set | None) -> float:
    """The energy-OOD AUROC (`sweep.kinds.trial_measures.ood_auroc`): the end layer's detector trained once
    (the T outliers of each outlier set through g<=j, the T training images' activations; `epochs` steps on T
    images, then `oe_epochs` on T images and T outliers), then per trial the n outliers of each set through
    g<=j, and the target, stitched and outlier activations through the detector."""
    ds, point, kind = spec.dataset, spec.end_point, spec.ood_detector or "small"
    n, train, sets = spec.ood_samples or 0, spec.ood_train_size or 0, len(spec.ood_outliers)
    secs = 0.0
    setting = (spec.end_key, point, spec.ood_outliers, train, spec.ood_epochs, spec.ood_oe_epochs, kind)
    if detectors is None or setting not in detectors:
        if detectors is not None:
            detectors.add(setting)
        secs += h.read("end", "train", train) + p.forward(end_arch, ds, sets * train, upto=point)
        steps = train * ((spec.ood_epochs or 0) + 2 * (spec.ood_oe_epochs or 0))
        secs += p.detector(end_arch, ds, point, kind, steps, 0)
    secs += h.read("end", "test", n) + h.read("front", "test", n) + p.forward(end_arch, ds, sets * n, upto=point)
    return secs + p.detector(end_arch, ds, point, kind, 0, (2 + sets) * n)


def trial_price(spec, p: Pricer) -> float:
    """A stitching trial's `Kind.price`: `trial_seconds` with what the estimate's trials share (`Pricer`)."""
    return trial_seconds(spec, p, p.arch_of, p.fills, p.detectors)


# The other kinds' `Kind.price`: their images through each model they read.
def similarity_seconds(unit, p: Pricer) -> float:
    """A similarity unit: its images (x passes) through A and B, adversarial inputs as PGD steps; saliency,
    one step per image and model."""
    ds = unit.dataset
    if INDICES[unit.measure].similarity_by == "saliency":
        return p.unit_s + p.step(unit.a_arch, ds, unit.images) + p.step(unit.b_arch, ds, unit.images)
    images = unit.images * (unit.passes or 1)
    adv = (unit.attack_steps or 0) if "adversarial" in (unit.a_inputs, unit.b_inputs) else 0
    return (
        p.unit_s
        + p.forward(unit.a_arch, ds, images)
        + p.forward(unit.b_arch, ds, images)
        + (p.step(unit.a_arch, ds, images * adv) if adv else 0.0)
    )


def tsne_seconds(unit, p: Pricer) -> float:
    """A t-SNE unit: the forward passes; t-SNE itself (scikit-learn, on the CPU) is not priced."""
    return p.unit_s + p.forward(unit.arch, unit.dataset, unit.images)


def inversion_seconds(unit, p: Pricer) -> float:
    """An inversion unit: a forward and a backward through the donor up to its point per step."""
    return p.unit_s + p.step(unit.arch, unit.dataset, unit.images * (unit.steps + 1), upto=unit.point)


def training_similarity_seconds(unit, p: Pricer) -> float:
    """CKA across epochs: the images (x passes) through each kept epoch's model."""
    images = unit.images * unit.passes * len(unit.epochs)
    adv = unit.attack_steps or 0 if unit.inputs == "adversarial" else 0
    return p.unit_s + p.forward(unit.arch, unit.dataset, images) + p.step(unit.arch, unit.dataset, images * adv)


def reptest_seconds(unit, p: Pricer) -> float:
    """A representation-test unit: each member (`_member_seconds`)."""
    return p.unit_s + sum(_member_seconds(unit, member, p) for member in unit.members)


def overhead_seconds(unit, p: Pricer) -> float:
    """A unit priced by the profile's fixed cost alone (its passes are few: the examples kind's)."""
    return p.unit_s


def _member_seconds(unit, member, p: Pricer) -> float:
    """One member of a representation test: its front on the probe's training images, twice on the test
    images (probe, indices) and on the K fit images; its linear probe (`probe_epochs` x images x features x
    classes multiply-adds, forward and backward: 3, priced at the float64 rate, an upper bound); its indices
    against the reference (taken of the member's own shape: the reference is chosen as the unit runs)."""
    from sweep.config.shapes import activation_shape
    from sweep.plan.index_costs import Work, pair_work
    from sweep.plan.memory import ShapePair
    from sweep.registry import DATASETS

    layer, ds = member[2], unit.dataset
    images = unit.probe_train_size + 2 * unit.samples + unit.dm_samples
    shape = activation_shape(unit.arch, ds, layer)
    probe = Work(mac=3 * unit.probe_epochs * unit.probe_train_size * math.prod(shape) * DATASETS[ds].num_classes)
    indices = pair_work(ShapePair(shape, shape, {}), unit.indices, unit.samples, unit.dm_samples)
    return p.forward(unit.arch, ds, images, upto=layer) + p.algebra(probe + indices)
