"""Donor specs and their keys, the zoo donors' fields, and references to donors. The other donor sources (file,
RobustBench, noise) are `sweep.config.sources`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sweep.config.data import OPTIONS as DATA_OPTIONS
from sweep.config.data import DataSpec, parse_data
from sweep.config.errors import SpecError
from sweep.config.fields import NAME_RE, Option, Section, by_key, check_value, stable_hash
from sweep.config.shapes import check_builds, check_library_arch, library_version
from sweep.registry import (
    ARCHITECTURES,
    AUGMENTATIONS,
    DATASETS,
    DONOR_SOURCES,
    OPTIMIZERS,
    SCHEDULES,
    THREATS,
    TRAINING_METHODS,
    did_you_mean,
)

if TYPE_CHECKING:
    from sweep.config.evaluation import EvalSpec

# The donors' optimiser unless they name another: Balogh & Jelasity 2023 A.2 (SGD, Nesterov momentum 0.9, weight
# decay 1e-4, lr / 10 at 1/3 and 2/3 of the epochs).
DONOR_OPTIMISER = {"optimizer": "sgd_nesterov", "momentum": 0.9, "weight_decay": 1e-4, "lr_schedule": "step"}

NOISE_FIELDS = ("noise_sigma", "noise_train_per_class", "noise_test_per_class", "noise_seed")
DONOR_NUMERICS = {"precision": "fp32", "channels_last": False}  # a zoo donor's training step: the defaults
KEEP_DTYPES = ("float32", "float16")  # the kept epochs' weights (float16: half the disk and host memory)

# The version in every donor key. Kept apart from the results schema's version: a change of how trials or
# rows are identified must not retrain the zoo. Bump it only when what shapes a donor's weights changes.
DONOR_KEY_VERSION = 1

# What makes a donor's weights (or a noise sender's samples), versioned per source or per trained architecture: a
# fix that changes them bumps the entry, so that a cached zoo (and every trial on it) made by the old code is not
# reused. Absent: revision 1 (no field in the key, so other donors keep their keys).
#   source:noise 2       noise samples drawn with the classes in turns (they were class-ordered, and the first N
#                        test samples of a receiver rank held one class)
#   source:noise 3       each sample drawn from its own seed, so a batch is drawn when it is read and no part has
#                        to be held (one generator drew the whole split in order)
#   zoo:vgg19_tv 2       torchvision's initialisation (Kaiming-normal fan_out convolutions, N(0, 0.01) linear
#   zoo:resnet18_tv 2    layers, zero biases); PyTorch's default init left VGG-19's logits nearly constant
REVISIONS = {"source:noise": 3, "zoo:vgg19_tv": 2, "zoo:resnet18_tv": 2}


@dataclass(frozen=True, kw_only=True)
class DonorSpec:
    """A donor: trained by the engine (`zoo:<name>`) or read from a checkpoint file (`file:<name>`).

    `donor_key` hashes everything that shapes its weights (for a file: its content, not its path). `data` is
    the sweep's data unless the donor names its own (cross-task stitching).
    """

    name: str
    arch: str
    data: DataSpec
    source: str = "zoo"  # "zoo" | "file" | "robustbench" | "salman" | "noise"
    training: str | None = None
    epochs: int | None = None
    lr: float | None = None
    batch_size: int | None = None
    seed: int | None = None
    eps: float | None = None
    step_size: float | None = None
    steps: int | None = None
    adv_fraction: float | None = None
    beta: float | None = None  # TRADES' trade-off (Balogh & Jelasity 2023 A.3: 10)
    augment: tuple[str, ...] = ()
    path: str | None = None  # file: the checkpoint; robustbench: the model folder (not part of the identity)
    file_sha256: str | None = None
    robustbench_id: str | None = None  # "dataset/threat_model/name"
    salman_id: str | None = None  # Salman et al. 2020's checkpoint name, "resnet18_l2_eps3"
    # file: / salman: a checkpoint holding pickled objects besides tensors may be unpickled in full (it runs the
    # file's code: an explicit opt-in, not part of the identity)
    trust_pickle: bool = False
    mean: tuple[float, ...] | None = None  # file donors: the normalisation their weights expect
    std: tuple[float, ...] | None = None
    # zoo donors: keep the weights of every N-th epoch (and the last), for CKA across training epochs
    # (Cianfarani et al. 2022 Section 5); part of the key when set, since the cached donor must have them
    checkpoint_every: int | None = None
    # zoo donors: the dtype the kept epochs' floating-point weights are stored in; None: float32 (the key holds)
    keep_dtype: str | None = None
    # zoo donors: the optimiser and schedule (`OPTIMIZERS`, `SCHEDULES`); None = the default of DONOR_OPTIMISER,
    # so that the keys of donors that keep the defaults do not change
    optimizer: str | None = None
    momentum: float | None = None
    weight_decay: float | None = None
    lr_schedule: str | None = None
    # noise senders (Smith & Marcu 2024 Algorithms 1-2): no network; clustered noise shaped like the receiver's
    # activation at the stitch point (`NOISE_OPTIONS`)
    noise_sigma: float | None = None
    noise_train_per_class: int | None = None
    noise_test_per_class: int | None = None
    noise_seed: int | None = None  # the samples' own seed; None: drawn from each trial's seed
    # zoo donors: the training step's numerics (bf16 autocast, channels-last memory), None where the default
    # (fp32, contiguous) holds; they change the weights' rounding, so they join the key when set
    precision: str | None = None
    channels_last: bool | None = None
    # zoo donors: layer freezing (Cianfarani et al. 2022 D.5): ((stitch point, epoch), ...): after that epoch,
    # the point and every stage before it stop training; None: nothing freezes
    freeze: tuple[tuple[str, int], ...] | None = None

    def optimiser(self) -> dict:
        """The resolved optimiser settings: {optimizer, momentum, weight_decay, lr_schedule}."""
        own = {k: getattr(self, k) for k in DONOR_OPTIMISER}
        return {k: DONOR_OPTIMISER[k] if v is None else v for k, v in own.items()}

    @property
    def kept_epochs(self) -> tuple[int, ...]:
        """The epochs whose weights training keeps (`checkpoint_every`): every N-th, and the last."""
        if not self.checkpoint_every:
            return ()
        return tuple(sorted({*range(self.checkpoint_every, self.epochs + 1, self.checkpoint_every), self.epochs}))

    @property
    def ref(self) -> str:
        return f"{self.source}:{self.name}"

    @property
    def network(self) -> bool:
        """False for a sender that is no network (noise): nothing to build, train or evaluate."""
        return DONOR_SOURCES[self.source].network

    @property
    def donor_key(self) -> str:
        fields = dataclasses.asdict(self)
        fields.pop("name")  # a label: two donors with the same config share one checkpoint
        fields.pop("path")  # a location, not content
        fields.pop("trust_pickle")  # how the file is read, not what it holds
        fields["data"].pop("test_size")  # evaluation only: it does not shape the weights
        added_later = (
            "beta",
            "checkpoint_every",
            "keep_dtype",
            *DONOR_OPTIMISER,
            *NOISE_FIELDS,
            "salman_id",
            *DONOR_NUMERICS,
            "freeze",
        )
        for added in added_later:  # added after the first release: unset, the old hashes hold
            if fields[added] is None:
                fields.pop(added)
        revision = max(REVISIONS.get(f"source:{self.source}", 1), REVISIONS.get(f"{self.source}:{self.arch}", 1))
        extra = (("revision", revision if revision > 1 else None), ("library", library_version(self.arch)))
        fields.update({k: v for k, v in extra if v})  # a library network: its library's version shapes it
        return stable_hash({"kind": "donor", "v": DONOR_KEY_VERSION, **fields})


@dataclass(frozen=True, kw_only=True)
class DonorEval:
    """One evaluation of a donor: its clean and robust accuracy on the first `test_size` images of
    `dataset`'s official test split, under one robust-accuracy protocol. A donor is evaluated once per
    evaluation that the sweep uses (its own test set for the donors table, and the test images of every
    trial it serves), and a trial reads the row of exactly its own images and settings."""

    dataset: str
    test_size: int  # resolved: the number of test images, not null
    attacks: tuple[str, ...]
    eps: float
    iterations: int
    restarts: int
    n_eval_robust: int

    @classmethod
    def of(cls, data: DataSpec, evaluation: EvalSpec) -> DonorEval:
        return cls(
            dataset=data.dataset,
            test_size=data.sizes()[1],
            attacks=tuple(evaluation.attacks),
            # without an `eps` in the space, each dataset's own default (a digits donor in a CIFAR-10 sweep)
            eps=evaluation.eps if evaluation.eps_given else DATASETS[data.dataset].threat[0],
            iterations=evaluation.iterations,
            restarts=evaluation.restarts,
            n_eval_robust=min(evaluation.n_eval_robust, data.sizes()[1]),
        )

    def eval_id(self, donor_key: str) -> str:
        return stable_hash({"kind": "donor-eval", "donor_key": donor_key, **dataclasses.asdict(self)})

    def row_fields(self) -> dict:
        """The donors-table columns that record this evaluation (a row is used only where they all match)."""
        return {
            "eval_dataset": self.dataset,
            "test_size": self.test_size,
            "attack": "+".join(self.attacks),
            "eps": self.eps,
            "attack_iterations": self.iterations,
            "attack_restarts": self.restarts,
            "n_eval_robust": self.n_eval_robust,
        }


FREEZE_OPTIONS = by_key(
    (
        Option("through", "string", doc="a stitch point: it and every stage before it stop training"),
        Option("after", "integer", low=1, doc="the last epoch they train (below the donor's epochs)"),
    )
)
# The fields of a zoo donor (one the engine trains). Defaults: Balogh & Jelasity 2023 A.2 (plain), A.3 (PGD, TRADES).
ZOO_OPTIONS = by_key(
    (
        Option("arch", "string", choices=lambda: ARCHITECTURES),
        Option("training", "string", "plain", choices=lambda: TRAINING_METHODS),
        Option("epochs", "integer", low=1),
        Option("lr", "number", 0.1, low=0.0),
        Option("optimizer", "string", DONOR_OPTIMISER["optimizer"], choices=lambda: OPTIMIZERS),
        Option("momentum", "number", DONOR_OPTIMISER["momentum"], low=0.0, high=1.0, doc="the SGDs only"),
        Option("weight_decay", "number", DONOR_OPTIMISER["weight_decay"], low=0.0, doc="L2"),
        Option("lr_schedule", "string", DONOR_OPTIMISER["lr_schedule"], choices=lambda: SCHEDULES),
        Option("batch_size", "integer", 128, low=1),
        Option("seed", "integer", 0, low=0),
        Option("eps", "number", None, low=0.0, nullable=True, derived=True, doc="null: evaluation.eps"),
        Option("step_size", "number", None, low=0.0, derived=True, doc="the paper's step, scaled with eps"),
        Option("steps", "integer", 10, low=1),
        Option("adv_fraction", "number", 1.0, low=0.0, high=1.0),
        Option("beta", "number", 10.0, low=0.0),
        Option("augment", "string", (), many=True, choices=lambda: AUGMENTATIONS),
        Option("data", "mapping", None, nullable=True, fields=DATA_OPTIONS, doc="its own data section (cross-task)"),
        Option("checkpoint_every", "integer", None, low=1, nullable=True, doc="keep every N-th epoch's weights"),
        Option("keep_dtype", "string", "float32", choices=KEEP_DTYPES, doc="the kept epochs' weights"),
        Option("precision", "string", "fp32", choices=("fp32", "bf16"), doc="bf16: the training step autocast"),
        Option("channels_last", "bool", False, doc="the training step in channels-last memory format"),
        Option("freeze", "mapping", None, nullable=True, many=True, fields=FREEZE_OPTIONS, doc="layer freezing"),
    )
)


def parse_donor(
    name: Any, raw: Any, data: DataSpec, evaluation: EvalSpec, root: str | None = None, download: bool = True
) -> DonorSpec:
    path = f"donors.{name}"
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise SpecError(path, "a donor name of letters, digits, '_', '-' or '.'", name)
    donor = source_of(check_library_arch(raw, path)).parse(name, raw, data, evaluation, root, download)
    check_builds(donor.arch, donor.data.dataset, f"{path}.arch")  # a plugin's network: built and run once
    return donor


def source_of(raw: Any):
    """The registered donor source a donor mapping names by its marker field (none: the zoo)."""
    marked = [src for src in DONOR_SOURCES.values() if src.marker and isinstance(raw, dict) and src.marker in raw]
    return marked[0] if marked else DONOR_SOURCES["zoo"]


def parse_zoo_donor(name: str, raw: Any, data: DataSpec, evaluation: EvalSpec, root, download) -> DonorSpec:
    path = f"donors.{name}"
    s = Section(raw, path, set(ZOO_OPTIONS))
    training = s.read(ZOO_OPTIONS["training"])
    method = TRAINING_METHODS[training]
    reads = method.fields
    for k in sorted(set().union(*(m.fields for m in TRAINING_METHODS.values())) - reads):
        if k in raw:
            needs = " or ".join(n for n, m in TRAINING_METHODS.items() if k in m.fields)
            raise SpecError(
                f"{path}.{k}", f"no {k} field for training: {training}", raw[k], f"{k} applies to training: {needs}"
            )
    # the donor trains on its own data (cross-task stitching, Balogh & Jelasity 2023 5.1)
    if raw.get("data") is not None:
        data = parse_data(raw["data"], f"{path}.data", root, download)
    return DonorSpec(
        name=name,
        arch=s.read(ZOO_OPTIONS["arch"]),
        data=data,
        training=training,
        epochs=s.read(ZOO_OPTIONS["epochs"]),
        lr=s.read(ZOO_OPTIONS["lr"]),
        batch_size=s.read(ZOO_OPTIONS["batch_size"]),
        seed=s.read(ZOO_OPTIONS["seed"]),
        **_adversarial_fields(s, reads, data, evaluation, method.threat, path),
        augment=tuple(s.read(ZOO_OPTIONS["augment"])) if raw.get("augment") else (),
        checkpoint_every=s.read(ZOO_OPTIONS["checkpoint_every"]),
        keep_dtype=_keep_dtype(s, path),
        **_optimiser_fields(s, path),
        **{k: None if (v := s.read(ZOO_OPTIONS[k])) == default else v for k, default in DONOR_NUMERICS.items()},
        freeze=_freeze(s, path),
    )


def _keep_dtype(s: Section, path: str) -> str | None:
    """The kept epochs' dtype, None for float32 (the donor keys that predate it hold); only with epochs kept."""
    dtype = s.read(ZOO_OPTIONS["keep_dtype"])
    if "keep_dtype" in s.raw and not s.raw.get("checkpoint_every"):
        raise SpecError(f"{path}.keep_dtype", "checkpoint_every set beside it", s.raw["keep_dtype"], "no epochs kept")
    return None if dtype == "float32" else dtype


def _freeze(s: Section, path: str) -> tuple[tuple[str, int], ...] | None:
    """Layer freezing (Cianfarani et al. 2022 D.5): a list of {through: POINT, after: EPOCH}, deeper points
    freezing later (staggered), each epoch below the donor's last."""
    if s.raw.get("freeze") is None:
        return None
    arch, epochs = s.raw.get("arch"), s.raw.get("epochs")
    points = ARCHITECTURES[arch].stitch_points()
    stages = []
    for k, raw in enumerate(s.read(ZOO_OPTIONS["freeze"])):
        f = Section(raw, f"{path}.freeze[{k}]", set(FREEZE_OPTIONS))
        through = f.read(FREEZE_OPTIONS["through"])
        check_value(through, f"{f.path}.through", "string", choices=points)
        stages.append((through, f.read(FREEZE_OPTIONS["after"], high=epochs - 1)))
    order = [(points.index(p), e) for p, e in stages]
    if any(a[0] >= b[0] or a[1] > b[1] for a, b in zip(order, order[1:])):
        raise SpecError(f"{path}.freeze", "stages deeper and no earlier than the one before (staggered)", stages)
    return tuple(stages)


def _optimiser_fields(s: Section, path: str) -> dict:
    """A zoo donor's optimiser settings, each None where it keeps the default (the donor key then holds)."""
    optimizer = s.read(ZOO_OPTIONS["optimizer"])
    if "momentum" in s.raw and not OPTIMIZERS[optimizer].momentum:
        raise SpecError(f"{path}.momentum", f"no momentum with optimizer: {optimizer}", s.raw["momentum"])
    values = {k: s.read(ZOO_OPTIONS[k]) for k in DONOR_OPTIMISER}
    if not OPTIMIZERS[optimizer].momentum:
        values["momentum"] = None
    return {k: None if v == DONOR_OPTIMISER[k] else v for k, v in values.items()}


def _adversarial_fields(s: Section, reads: frozenset, data: DataSpec, evaluation: EvalSpec, threat: str, path) -> dict:
    """The fields of an adversarial training method (None where the method does not read them). An L-inf
    method's eps defaults to the evaluation's (when the space gives one, else the dataset's) and its step to the
    paper's for the dataset; another threat model
    needs its own eps (a budget on another scale), and its step defaults to the threat model's."""
    adv = bool(reads & {"eps"})
    eps_default, step_default = DATASETS[data.dataset].threat
    eps = s.read(ZOO_OPTIONS["eps"]) if adv else None
    if adv and threat != "linf" and eps is None:
        budget = THREATS[threat].budget
        raise SpecError(f"{path}.eps", f"{budget} ({threat} training)", "nothing", "the field is required")
    side = DATASETS[data.dataset].image_size
    if adv and threat == "snow" and side % 4:
        raise SpecError(f"{path}.training", "a threat model for this data (snow needs sides divisible by 4)", threat)
    if adv and threat == "linf" and eps is not None and eps > 1.0:
        raise SpecError(f"{path}.eps", "an L-inf radius on pixels in [0, 1], at most 1", eps)
    # without eps: the space's evaluation eps when it names one, else the donor's own dataset's (a digits donor
    # in a CIFAR-10 sweep trains at the digits' 0.3)
    eps = (eps if eps is not None else evaluation.eps if evaluation.eps_given else eps_default) if adv else None
    steps = s.read(ZOO_OPTIONS["steps"]) if adv else None
    step = None
    if adv:
        own = THREATS[threat].default_step
        step = scaled_step(eps, eps_default, step_default) if threat == "linf" else own(eps, steps)
    return dict(
        eps=eps,
        step_size=s.read(ZOO_OPTIONS["step_size"], default=step) if adv else None,
        steps=steps,
        adv_fraction=s.read(ZOO_OPTIONS["adv_fraction"]) if "adv_fraction" in reads else None,
        beta=s.read(ZOO_OPTIONS["beta"]) if "beta" in reads else None,
    )


def scaled_step(eps: float, paper_eps: float, paper_step: float) -> float:
    """The paper's PGD step for the dataset, scaled when eps differs from the paper's (same eps/step ratio)."""
    return paper_step if eps == paper_eps else eps * paper_step / paper_eps


def resolve_ref(ref: str, path: str, donors: dict[str, DonorSpec]) -> DonorSpec:
    kind, _, name = ref.partition(":")
    if kind not in DONOR_SOURCES or not name:
        forms = ", ".join(f"'{k}:<name>'" for k in DONOR_SOURCES)
        raise SpecError(path, f"a donor reference {forms}", ref, _ref_hint(kind, name, donors))
    if name not in donors:
        raise SpecError(path, f"a donor defined under donors: one of {sorted(donors)}", ref, did_you_mean(name, donors))
    if donors[name].source != kind:
        raise SpecError(path, f"'{donors[name].source}:{name}' (donors.{name} is a {donors[name].source} donor)", ref)
    return donors[name]


def _ref_hint(kind: str, name: str, donors: dict[str, DonorSpec]) -> str:
    """The REF meant: a donor's name without its source ('net_s0': 'zoo:net_s0'), or a misspelt source."""
    if name:
        return did_you_mean(kind, DONOR_SOURCES)
    if kind in donors:
        return f"did you mean '{donors[kind].source}:{kind}'?"
    return did_you_mean(kind, [f"{d.source}:{n}" for n, d in donors.items()])


@dataclass(frozen=True, kw_only=True)
class DonorUnit:
    """The fields of a unit that reads one donor on the data it trained on (inversion, t-SNE, CKA across
    epochs): that data, and the donor by its key and architecture."""

    dataset: str
    train_size: int | None
    val_size: int
    test_size: int | None
    donor_key: str
    arch: str

    @staticmethod
    def of(donor: DonorSpec) -> dict:
        """The fields of `donor`, for a unit's constructor."""
        return dict(**donor.data.fields(), donor_key=donor.donor_key, arch=donor.arch)
