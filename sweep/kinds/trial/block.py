"""One stitching block's options: declared once (`OPTIONS`, with their defaults: Balogh & Jelasity 2023 A.5 for the
stitcher's training, A.3 for the PGD of adversarial objectives), read and checked once per block (`read_block`), before
the block is expanded into trials (`stitching.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sweep.config.errors import SpecError
from sweep.config.evaluation import EvalSpec
from sweep.config.fields import Option, Section, by_key
from sweep.registry import DATASETS, INDICES, OBJECTIVES, OPTIMIZERS, SCHEDULES, STITCHERS

LAYOUTS = ("auto", "positions", "pooled", "flatten")
GRADIENT = "gradient objectives (tlm, adv, adv_mix, trades, dm+tlm)"


def trial_indices() -> list[str]:
    """The indices `stitching.indices` may name: the registered ones of scope "trial" (a trials column each)."""
    return [n for n, i in INDICES.items() if "trial" in i.scopes]


LAYOUT_OPTIONS = by_key(
    (Option("pwcca", "string", "auto", choices=LAYOUTS), Option("opd", "string", "auto", choices=LAYOUTS))
)
OOD_OPTIONS = by_key(
    (
        Option("outliers", "string", ("noise",), many=True, choices=lambda: ["noise", "random300k", *DATASETS]),
        Option("train_size", "integer", 2000, low=10, nullable=True, cap="train"),
        Option("epochs", "integer", 3, low=1),
        Option("oe_epochs", "integer", 2, low=1),
        Option("samples", "integer", 500, low=10, nullable=True, cap="test"),
        Option("detector", "string", "small", choices=("small", "paper"), doc="paper: ResNet-18 / ViT-Ti blocks"),
    )
)
OPTIONS = by_key(
    (
        Option(
            "pairs", "mapping", pairs=("front", "end"), doc="[{front: REF, end: REF, data: front | end | [front, end]}]"
        ),
        Option("objectives", "string", many=True, choices=lambda: OBJECTIVES),
        Option("stitch_points", "string", "all", or_list=True, doc="all, or a list of the front's stitch points"),
        Option("end_points", "string", "same", or_list=True, doc="same | all | a list of the end's stitch points"),
        Option("seeds", "integer", (0,), many=True, low=0),
        Option("epochs", "integer", 30, low=1, doc=GRADIENT),
        Option("lr", "number", 1e-3, low=0.0, doc=GRADIENT),
        Option("optimizer", "string", "adam", choices=lambda: OPTIMIZERS, doc=GRADIENT),
        Option(
            "weight_decay", "number", 1e-4, low=0.0, doc="L2 weight decay (Balogh & Jelasity 2023 A.2, kept by A.5)"
        ),
        Option("momentum", "number", 0.9, low=0.0, high=1.0, doc="sgd only (Smith & Marcu 2024 B.1)"),
        Option("lr_schedule", "string", "step", choices=lambda: SCHEDULES, doc="step: lr / 10 at 1/3 and 2/3"),
        Option("batch_size", "integer", 128, low=1, doc=GRADIENT),
        Option("init", "string", "random", choices=("random", "identity", "dm")),
        Option("donor_bn", "string", "frozen", choices=("frozen", "update")),
        Option("stitcher", "string", "affine", choices=lambda: STITCHERS),
        Option("alphas", "number", (0.5,), many=True, low=0.0, high=1.0, doc="adv, adv_mix"),
        Option("betas", "number", (1.0,), many=True, low=0.0, doc="trades (Balogh & Jelasity 2023 B.1: 1)"),
        Option("adv_eps", "number", None, low=0.0, high=1.0, nullable=True, derived=True, doc="null: evaluation.eps"),
        Option("adv_step_size", "number", None, low=0.0, nullable=True, derived=True, doc="null: the paper's step"),
        Option("adv_steps", "integer", 10, low=1),
        Option("adv_random_start", "bool", None, nullable=True, derived=True, doc="null: the objective's"),
        Option("dm_samples", "integer", 100, low=1, nullable=True, cap="train", doc="K training images"),
        Option("precision", "string", "fp32", choices=("fp32", "bf16")),
        Option("channels_last", "bool", False),
        Option("indices", "string", (), many=True, choices=lambda: trial_indices()),
        Option("similarity_samples", "integer", 1000, low=5, nullable=True, cap="test"),
        Option("permutations", "integer", 0, low=0, doc="a permutation null for each index: 0 = none"),
        Option("mknn_k", "integer", None, low=1, nullable=True, doc="mknn: neighbours per image; null: 10"),
        Option("layouts", "mapping", None, fields=LAYOUT_OPTIONS, doc="per index"),
        Option("ood", "mapping", None, nullable=True, fields=OOD_OPTIONS, doc="null: no OOD AUROC"),
    )
)
ATTACK_OPTIONS = ("adv_eps", "adv_step_size", "adv_steps", "adv_random_start")


@dataclass(frozen=True)
class Block:
    """A stitching block's options, read and checked once (before the grid is expanded)."""

    path: str
    objectives: list[str]
    alphas: list[float]
    betas: list[float]
    seeds: list[int]
    gradient: dict  # epochs, lr, batch_size, init, donor_bn, optimiser: kept where the objective reads them
    adversarial: dict  # adv_eps, adv_step_size (None: the dataset's), adv_steps, adv_random_start (None)
    numerics: dict
    stitcher: str
    indices: tuple[str, ...]
    similarity_samples: int | None  # as written (None: the default, capped by the test images)
    permutations: int  # the indices' permutation null: how many shuffles (0: none)
    mknn_k: int | None  # index mknn: the neighbours per image (None: the index's 10)
    ood: dict | None
    layouts: dict[str, str]
    dm_samples: int | None  # as written (None: the default, capped by the training images)
    points: Any  # "all" or a list, checked per front architecture
    end_points: Any  # "same", "all" or a list
    params: dict  # the objectives' own parameters, as written (each objective fills in its defaults)


def _opt(st: Section, key: str, **kw) -> Any:
    return st.read(OPTIONS[key], **kw)


def objective_params() -> dict[str, Option]:
    """The parameters registered objectives declare as their own (`Objective.params`), by key."""
    out: dict[str, Option] = {}
    for name, objective in OBJECTIVES.items():
        for opt in objective.params:
            if opt.key in OPTIONS or out.get(opt.key, opt) != opt:
                raise ValueError(f"objective {name!r}: parameter {opt.key!r} is declared elsewhere differently")
            out[opt.key] = opt
    return out


def read_block(raw: Any, path: str, evaluation: EvalSpec) -> Block:
    own = objective_params()
    st = Section(raw, path, set(OPTIONS) | set(own))
    objectives = _opt(st, "objectives")
    init = _opt(st, "init")
    _refuse_unread_options(st, path, objectives, init)
    params = _read_params(st, path, objectives, own)
    indices = tuple(_opt(st, "indices")) if st.raw.get("indices") else ()
    for key in ("similarity_samples", "permutations"):
        if key in st.raw and not indices:
            raise SpecError(
                f"{path}.{key}",
                "an option of a block that lists indices",
                st.raw[key],
                f"set indices, some of {sorted(trial_indices())}",
            )
    mknn_k = _opt(st, "mknn_k")
    if mknn_k is not None and "mknn" not in indices:
        raise SpecError(f"{path}.mknn_k", "an option of a block whose indices list mknn", mknn_k, "add mknn to indices")
    end_points = st.raw.get("end_points", OPTIONS["end_points"].default)
    if end_points not in ("same", "all") and (not isinstance(end_points, list) or not end_points):
        raise SpecError(
            f"{path}.end_points", "'same', 'all' or a non-empty list of stitch points of the end model", end_points
        )
    adv_eps = _opt(st, "adv_eps")
    return Block(
        path=path,
        objectives=objectives,
        alphas=_opt(st, "alphas"),
        betas=_opt(st, "betas"),
        seeds=_opt(st, "seeds"),
        gradient=dict(
            epochs=_opt(st, "epochs"),
            lr=_opt(st, "lr"),
            batch_size=_opt(st, "batch_size"),
            init=init,
            donor_bn=_opt(st, "donor_bn"),
            **_optimiser_fields(st, path),
        ),
        adversarial=dict(
            adv_eps=evaluation.eps if adv_eps is None else adv_eps,
            adv_step_size=_opt(st, "adv_step_size"),
            adv_steps=_opt(st, "adv_steps"),
            adv_random_start=_opt(st, "adv_random_start"),
        ),
        numerics=dict(precision=_opt(st, "precision"), channels_last=_opt(st, "channels_last")),
        stitcher=_opt(st, "stitcher"),
        indices=indices,
        permutations=_opt(st, "permutations") if indices else 0,
        mknn_k=mknn_k,
        similarity_samples=_opt(st, "similarity_samples", default=None),
        ood=_read_ood(st, path),
        layouts=_read_layouts(st, path, indices),
        dm_samples=_opt(st, "dm_samples", default=None),
        points=st.raw.get("stitch_points", OPTIONS["stitch_points"].default),
        end_points=end_points,
        params=params,
    )


def _read_params(st: Section, path: str, objectives: list[str], own: dict[str, Option]) -> dict:
    """The objectives' own parameters the block sets; one that no chosen objective declares is refused."""
    chosen = {opt.key for o in objectives for opt in OBJECTIVES[o].params}
    for key in sorted(set(st.raw) & set(own) - chosen):
        readers = sorted(n for n, o in OBJECTIVES.items() if key in {p.key for p in o.params})
        raise SpecError(
            f"{path}.{key}",
            f"an option of the chosen objectives {objectives}",
            st.raw[key],
            f"{key} applies to objectives {readers}",
        )
    values = {key: st.read(own[key]) for key in sorted(chosen) if key in st.raw}
    return {key: tuple(v) if isinstance(v, list) else v for key, v in values.items()}  # hashable in a TrialSpec


def _optimiser_fields(st: Section, path: str) -> dict:
    """The stitcher's optimiser: Adam by default (Balogh & Jelasity 2023 A.5); the SGDs take a momentum."""
    optimizer = _opt(st, "optimizer")
    reads_momentum = OPTIMIZERS[optimizer].momentum
    if "momentum" in st.raw and not reads_momentum:
        raise SpecError(
            f"{path}.momentum",
            f"no momentum with optimizer: {optimizer}",
            st.raw["momentum"],
            "momentum applies to optimizer: " + " or ".join(n for n, o in OPTIMIZERS.items() if o.momentum),
        )
    return dict(
        optimizer=optimizer,
        weight_decay=_opt(st, "weight_decay"),
        momentum=_opt(st, "momentum") if reads_momentum else None,
        lr_schedule=_opt(st, "lr_schedule"),
    )


def _refuse_unread_options(st: Section, path: str, objectives: list[str], init: str) -> None:
    """An option no chosen objective reads is a mistake (a typo'd objective list, say): refuse it, naming the
    objectives it applies to."""
    reads = set().union(*(OBJECTIVES[o].fields for o in objectives))
    options = {"alphas": "alpha", "betas": "beta"} | {k: k for k in ATTACK_OPTIONS}
    for key, field_name in options.items():
        if key in st.raw and field_name not in reads:
            readers = sorted(o for o, obj in OBJECTIVES.items() if field_name in obj.fields)
            raise SpecError(
                f"{path}.{key}",
                f"an option of the chosen objectives {objectives}",
                st.raw[key],
                f"{key} applies to objectives {readers}",
            )
    dm_used = "dm_samples" in reads or (init == "dm" and "init" in reads) or "dm" in (st.raw.get("indices") or [])
    if "dm_samples" in st.raw and not dm_used:
        readers = sorted(n for n, o in OBJECTIVES.items() if "dm_samples" in o.fields)
        raise SpecError(
            f"{path}.dm_samples",
            f"an option of the chosen objectives {objectives}",
            st.raw["dm_samples"],
            f"dm_samples applies to objectives {readers}, to init: dm and to the dm index",
        )


def _read_ood(st: Section, path: str) -> dict | None:
    raw = st.get("ood", "mapping", None, nullable=True)
    if raw is None:
        return None
    o = Section(raw, f"{path}.ood", set(OOD_OPTIONS))
    out = {k: o.read(opt, default=None) if opt.cap else o.read(opt) for k, opt in OOD_OPTIONS.items()}
    out["outliers"] = tuple(out["outliers"])
    return out


def _read_layouts(st: Section, path: str, indices: tuple[str, ...]) -> dict[str, str]:
    raw = st.get("layouts", "mapping", {})
    lay = Section(raw, f"{path}.layouts", set(LAYOUT_OPTIONS))
    for k in raw:
        if k not in indices:
            raise SpecError(
                f"{path}.layouts.{k}",
                f"a layout of an index the block lists ({list(indices)})",
                raw[k],
                f"add {k} to indices",
            )
    return {k: lay.read(opt) for k, opt in LAYOUT_OPTIONS.items() if k in indices}
