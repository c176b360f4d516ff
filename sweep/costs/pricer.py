"""Pricing image passes under a cost profile (`sweep.planning.estimate`): `Pricer` prices passes through the
networks per architecture and input shape, and the indices' float64 algebra (`sweep.costs.work.Work`) at the
profile's rates; `sizes` and `attack_seconds` are what several kinds' prices read. Each kind's own price
(`Kind.price`) is built from these. Torch-free: planning reads it."""

from __future__ import annotations


def shape_key(arch: str, channels: int, image_size: int) -> str:
    return f"{arch}@{channels}x{image_size}"


class Pricer:
    """Prices image passes of one architecture on one input shape with a profile's timings. Per unit priced
    (`start`), it notes the architectures the price read (`touched`) and whether it lacked timings (`lacking`);
    over the estimate, the shapes the profile does not know (`unknown`) and the OOD detectors asked of each."""

    def __init__(self, profile: dict, missing: set[str], arch_of: dict | None = None, cache: bool = True) -> None:
        self.archs = profile["archs"]
        self.unit_s = float(profile.get("unit_s", 0.0))
        self.rates = profile.get("algebra")  # float64 algebra, seconds per operation (`sweep.costs.work`)
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
        """Seconds of float64 algebra (`sweep.costs.work.Work`) at the profile's rates."""
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


def sizes(dataset: str, train: int | None, val: int, test: int | None) -> tuple[int, int, int]:
    """(train, val, test) images of `dataset`'s splits: an unset training size is the pool less the validation
    images, an unset test size the dataset's test set."""
    from sweep.registry import DATASETS

    info = DATASETS[dataset]
    return (info.train_pool - val if train is None else train), val, (info.test if test is None else test)


# AutoAttack's standard version per image, at most: APGD-CE 100 steps, APGD-T and FAB-T 9 targets x 100, Square
# 5,000 queries (forward passes); it attacks only the images still robust, so this is an upper bound
STANDARD_STEPS, STANDARD_QUERIES = 1900, 5000


def attack_seconds(p: Pricer, arch: str, dataset: str, n: int, attacks, iterations: int, restarts: int) -> float:
    """AutoAttack on `n` images: each attack's iterations (and restarts) as steps (a forward and a backward);
    `standard`: its own budget (`STANDARD_STEPS` steps and `STANDARD_QUERIES` forward passes per image)."""
    if not n:
        return 0.0
    if tuple(attacks) == ("standard",):
        return p.step(arch, dataset, n * STANDARD_STEPS) + p.forward(arch, dataset, n * STANDARD_QUERIES)
    return p.step(arch, dataset, n * len(attacks) * iterations * restarts)


CHUNK = 250  # `sweep.worker.activations.CHUNK`: the frozen halves are computed and kept in chunks of this many images
