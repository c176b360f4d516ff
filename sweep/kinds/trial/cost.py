"""What a stitching trial costs before it runs: its indices' memory (`need`: `Kind.memory`) and its seconds under a
cost profile by phase (`trial_phases`; `price`: `Kind.price`), each phase paying for the frozen halves'
activations it is the first to read."""

from __future__ import annotations

import math

from sweep.config.shapes import activation_shape
from sweep.costs.memory import F32, Need, ShapePair, index_need
from sweep.costs.pricer import CHUNK, Pricer, attack_seconds, sizes
from sweep.registry import INDICES


def need(spec, sweep) -> Need | None:
    """A stitching trial's need, or None when it measures no sized index (a noise sender's indices are
    measured after the fit, on sampled features)."""
    front, end = (sweep.donors.get(ref.partition(":")[2]) for ref in (spec.front, spec.end))  # refs: "zoo:NAME"
    if not spec.indices or front is None or end is None or not front.network:
        return None
    pair = ShapePair(
        activation_shape(front.arch, spec.dataset, spec.front_point),
        activation_shape(end.arch, spec.dataset, spec.end_point),
        spec.layouts,
    )
    n, k = spec.similarity_samples, spec.dm_samples or 0
    return index_need("trial", spec.label, "similarity_samples", n, pair, spec.indices, k, bool(spec.permutations))


def held(spec, sweep) -> dict[tuple, int]:
    """The frozen halves' activations a trial keeps through the worker cache (`Kind.held`): of f<=i and g<=j on each
    part of its split (training, validation, test), the images its phases read (`trial_phases`, in the worker's
    chunks), in bytes, by what names each part in the cache (donor, point, dataset, split sizes, part: the donor
    stage's pass fills the test parts under the same names). The worker keeps those that fit its budget
    (`sweep.costs.memory.kept`). None for a fit that moves the donors' statistics (every read a forward pass) or a
    noise sender's trial (its halves run on samples drawn per trial)."""
    front, end = (sweep.donors.get(ref.partition(":")[2]) for ref in (spec.front, spec.end))
    if end is None or not end.network:
        return {}
    arch_of = {spec.end_key: end.arch, **({spec.front_key: front.arch} if front is not None and front.network else {})}
    reads = _Reads()
    trial_phases(spec, reads, arch_of, reads.fills, set())
    out = {}
    for where, n in reads.fills.items():
        key, point, dataset = where[:3]
        out[where] = n * F32 * math.prod(activation_shape(arch_of[key], dataset, point))
    return out


class _Reads:
    """A pricer that prices nothing: `trial_phases` run with it leaves in `fills` the images of each frozen half's
    part the trial reads ((donor, point, dataset, split sizes, part) -> images)."""

    unit_s = 0.0

    def __init__(self) -> None:
        self.fills: dict = {}

    def forward(self, *args, **kwargs) -> float:
        return 0.0

    step = detector = algebra = forward


def working(spec, sweep) -> int:
    """A trial's working memory on the CPU (`Kind.working`, `sweep.costs.working`): the largest of its gradient
    fit's step (the stitcher's output through the end network after the point, in `batch_size`; an adversarial
    fit's PGD through both networks whole, an upper bound), its evaluation's forward and a robust evaluation's
    attack (gradients through both networks on its batch)."""
    from sweep.costs.working import ATTACK_BATCH, fit_bytes, forward_bytes

    front, end = (sweep.donors.get(ref.partition(":")[2]) for ref in (spec.front, spec.end))
    if end is None or not end.network:
        return 0
    ds, out = spec.dataset, [forward_bytes(end.arch, spec.dataset)]
    whole_front = fit_bytes(front.arch, ds, None, 1) if front is not None and front.network else 0
    if spec.objective != "dm" and spec.batch_size:
        adversarial = spec.adv_steps is not None and spec.objective not in ("tlm", "dm+tlm")
        step = fit_bytes(end.arch, ds, None if adversarial else spec.end_point, spec.batch_size)
        out.append(step + (whole_front * spec.batch_size if adversarial else 0))
    if spec.n_eval_robust:
        b = min(spec.n_eval_robust, ATTACK_BATCH)
        out.append(fit_bytes(end.arch, ds, None, b) + whole_front * b)
    return max(out)


PHASES = ("setup", "similarity", "fit", "eval_clean", "eval_robust", "ood")  # a trial's `time_{phase}_s` columns


def trial_seconds(spec, p: Pricer, arch_of: dict, fills: dict | None = None, detectors: set | None = None) -> float:
    """One stitching trial: the sum of its phases (`trial_phases`)."""
    return sum(trial_phases(spec, p, arch_of, fills, detectors).values())


class _Halves:
    """The frozen halves' activations a trial reads, f<=i (`front`) and g<=j (`end`). With the worker's cache
    (`fills`: (donor, point, split) -> images computed so far in this sweep) each is computed once, chunk by
    chunk as far as the units read it (`sweep.worker.activations.Frozen`); without it (None), or when the fit moves
    the donors' statistics, every read is a forward pass."""

    def __init__(self, spec, p: Pricer, arch_of: dict, fills: dict | None) -> None:
        self.spec, self.p, self.fills = spec, p, fills
        self.sizes = sizes(spec.dataset, spec.train_size, spec.val_size, spec.test_size)
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

    train, val, test = sizes(spec.dataset, spec.train_size, spec.val_size, spec.test_size)
    ea, ds = arch_of[spec.end_key], spec.dataset
    h = _Halves(spec, p, arch_of, fills)
    t = dict.fromkeys(PHASES, 0.0)
    t["setup"] = p.unit_s
    k = spec.dm_samples or 0
    if spec.indices:
        n = spec.similarity_samples or 0
        t["similarity"] = h.read("front", "test", n) + h.read("end", "test", n)
        if any(INDICES[i].fit_images for i in spec.indices):  # an index fitted on the K training images (DM)
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
    attack = attack_seconds(p, ea, ds, spec.n_eval_robust, spec.attacks, spec.attack_iterations, spec.attack_restarts)
    t["eval_robust"] = attack
    if spec.ood_outliers:
        t["ood"] = _ood_seconds(spec, p, ea, h, detectors)
    return t


def _work(spec, front_arch: str | None, end_arch: str, what: str, k: int):
    """The float64 work of a trial's `indices` or of its `direct_match` fit, with K = `k` fit images (a noise
    sender: its samples, shaped as the target)."""
    from sweep.config.shapes import activation_shape
    from sweep.costs.memory import ShapePair
    from sweep.costs.work import direct_match_work, pair_work

    target = activation_shape(end_arch, spec.dataset, spec.end_point)
    sender = activation_shape(front_arch, spec.dataset, spec.front_point) if front_arch else target
    pair = ShapePair(sender, target, spec.layouts)
    if what == "direct_match":
        return direct_match_work(pair, k)
    return pair_work(pair, spec.indices, spec.similarity_samples or 0, k, spec.permutations)


def _ood_seconds(spec, p: Pricer, end_arch: str, h: _Halves, detectors: set | None) -> float:
    """The energy-OOD AUROC (`sweep.kinds.trial.measures.ood_auroc`): the end layer's detector trained once
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


def price(spec, p: Pricer) -> float:
    """A stitching trial's `Kind.price`: `trial_seconds` with what the estimate's trials share (`Pricer`)."""
    return trial_seconds(spec, p, p.arch_of, p.fills, p.detectors)
