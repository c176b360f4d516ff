"""Stitching blocks of a search space: `TrialSpec` (one configuration, hashed into its `trial_id`) and the
expansion of a block into trials (pairs x data x objectives x alphas x betas x seeds x stitch points x end
points). Names of objectives, indices, stitchers and architectures are looked up in their registries."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from sweep.config.data import DataSpec
from sweep.config.donors import DonorEval, DonorSpec, resolve_ref, scaled_step
from sweep.config.errors import SpecError
from sweep.config.evaluation import EvalSpec
from sweep.config.fields import Section
from sweep.config.trial import TrialSpec
from sweep.registry import ARCHITECTURES, DATASETS, INDICES, OBJECTIVES, STITCHERS, did_you_mean

INITS = ("random", "identity", "dm")
OPTIMIZERS = ("adam", "sgd")
LR_SCHEDULES = ("step", "constant")
DONOR_BN = ("frozen", "update")
PRECISIONS = ("fp32", "bf16")


BLOCK_FIELDS = {
    "pairs",
    "stitch_points",
    "end_points",
    "objectives",
    "alphas",
    "betas",
    "seeds",
    "epochs",
    "lr",
    "batch_size",
    "dm_samples",
    "init",
    "donor_bn",
    "precision",
    "channels_last",
    "stitcher",
    "optimizer",
    "weight_decay",
    "momentum",
    "lr_schedule",
    "adv_eps",
    "adv_step_size",
    "adv_steps",
    "adv_random_start",
    "indices",
    "similarity_samples",
    "layouts",
    "ood",
}
STITCH_DATA = ("front", "end")
ATTACK_OPTIONS = ("adv_eps", "adv_step_size", "adv_steps", "adv_random_start")


def _check_dm_samples(
    field: str, k: int, dataset: str, front_arch: str, point: str, end_arch: str, end_point: str
) -> None:
    """Direct matching solves C_in + 1 unknowns per output channel from K images x the target's positions:
    refuse a K that leaves the least-squares fit undetermined, saying which K is needed."""
    import math

    info = DATASETS[dataset]
    src = ARCHITECTURES[front_arch].activation_shapes(info.channels, info.image_size, info.num_classes)[point]
    tgt = ARCHITECTURES[end_arch].activation_shapes(info.channels, info.image_size, info.num_classes)[end_point]
    channels = src[0] if len(src) == 3 else src[1]
    positions = math.prod(tgt[1:]) if len(tgt) == 3 else tgt[0]
    needed = math.ceil((channels + 1) / positions)
    if k < needed:
        raise SpecError(
            field,
            f"K >= {needed} images for a determined least-squares fit from {point}"
            f" ({channels} channels) to {end_point} ({positions} positions per image)",
            k,
        )


LAYOUT_INDICES = ("pwcca", "opd")
LAYOUTS = ("auto", "positions", "pooled", "flatten")


def _layout(setting: str, dataset: str, front_arch: str, point: str, end_arch: str, end_point: str) -> str:
    """`auto` resolves as seed 004's reference code does: per-position rows (N*H*W x C, or N*T x D for
    tokens) when the two activation shapes match, pooled rows (N x C) otherwise."""
    if setting != "auto":
        return setting

    info = DATASETS[dataset]
    src = ARCHITECTURES[front_arch].activation_shapes(info.channels, info.image_size, info.num_classes)[point]
    tgt = ARCHITECTURES[end_arch].activation_shapes(info.channels, info.image_size, info.num_classes)[end_point]
    return "positions" if tuple(src) == tuple(tgt) else "pooled"


def _optimiser_fields(st: Section, path: str) -> dict:
    """The stitcher's optimiser. Defaults: seed 000 A.5 (Adam, and A.2's settings: L2 weight decay 1e-4, lr
    divided by 10 at 1/3 and 2/3 of the epochs). SGD takes a momentum (default 0.9, as seed 003 B.1)."""
    optimizer = st.get("optimizer", "string", "adam", choices=OPTIMIZERS)
    if "momentum" in st.raw and optimizer != "sgd":
        raise SpecError(
            f"{path}.momentum",
            "no momentum with optimizer: adam",
            st.raw["momentum"],
            "momentum applies to optimizer: sgd",
        )
    return dict(
        optimizer=optimizer,
        weight_decay=st.get("weight_decay", "number", 1e-4, low=0.0),
        momentum=st.get("momentum", "number", 0.9, low=0.0, high=1.0) if optimizer == "sgd" else None,
        lr_schedule=st.get("lr_schedule", "string", "step", choices=LR_SCHEDULES),
    )


@dataclass(frozen=True)
class _Block:
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
    similarity_samples: int | None
    ood: dict | None
    layouts: dict[str, str]
    dm_samples: int | None  # as written (None: min(100, training images))
    points: Any  # "all" or a list, checked per front architecture
    end_points: Any  # "same", "all" or a list


def expand_block(
    raw: Any, path: str, data: DataSpec, evaluation: EvalSpec, donors: dict[str, DonorSpec], used: set[str]
) -> list[TrialSpec]:
    """One stitching block: pairs x stitch data x objectives x alphas x betas x seeds x stitch points."""
    block = _read_block(Section(raw, path, BLOCK_FIELDS), path, evaluation)
    pairs = _read_pairs(raw.get("pairs"), path, donors, block.end_points)
    used.update(name for front, end, _ in pairs for name in (front.name, end.name))
    trials = []
    for front, end, roles in pairs:
        points = _stitch_points(block.points, front.arch, f"{path}.stitch_points")
        layer_pairs = _layer_pairs(points, block.end_points, end.arch, f"{path}.end_points")
        for role in roles:
            tdata = {"sweep": data, "front": front.data, "end": end.data}[role]
            for objective, alpha, beta, seed in itertools.product(
                block.objectives, block.alphas, block.betas, block.seeds
            ):
                per_data = _per_data(block, objective, alpha, beta, tdata)
                for point, end_point in layer_pairs:
                    trials.append(
                        _trial(block, per_data, evaluation, front, end, role, tdata, objective, seed, point, end_point)
                    )
    return trials


def _read_block(st: Section, path: str, evaluation: EvalSpec) -> _Block:
    objectives = st.get_list("objectives", "string", choices=sorted(OBJECTIVES))
    init = st.get("init", "string", "random", choices=INITS)
    _refuse_unread_options(st, path, objectives, init)
    indices = tuple(st.get_list("indices", "string", [], choices=sorted(INDICES))) if st.raw.get("indices") else ()
    if "similarity_samples" in st.raw and not indices:
        raise SpecError(
            f"{path}.similarity_samples",
            "an option of a block that lists indices",
            st.raw["similarity_samples"],
            f"set indices, some of {sorted(INDICES)}",
        )
    end_points = st.raw.get("end_points", "same")
    if end_points not in ("same", "all") and (not isinstance(end_points, list) or not end_points):
        raise SpecError(
            f"{path}.end_points", "'same', 'all' or a non-empty list of stitch points of the end model", end_points
        )
    adv_eps = st.get("adv_eps", "number", None, low=0.0, high=1.0, nullable=True)
    return _Block(
        path=path,
        objectives=objectives,
        alphas=st.get_list("alphas", "number", [0.5], low=0.0, high=1.0),
        betas=st.get_list("betas", "number", [1.0], low=0.0),
        seeds=st.get_list("seeds", "integer", [0], low=0),
        gradient=dict(
            epochs=st.get("epochs", "integer", 30, low=1),
            lr=st.get("lr", "number", 1e-3, low=0.0),
            batch_size=st.get("batch_size", "integer", 128, low=1),
            init=init,
            donor_bn=st.get("donor_bn", "string", "frozen", choices=DONOR_BN),
            **_optimiser_fields(st, path),
        ),
        adversarial=dict(
            adv_eps=evaluation.eps if adv_eps is None else adv_eps,
            adv_step_size=st.get("adv_step_size", "number", None, low=0.0, nullable=True),
            adv_steps=st.get("adv_steps", "integer", 10, low=1),
            adv_random_start=st.get("adv_random_start", "bool", None, nullable=True),
        ),
        numerics=dict(
            precision=st.get("precision", "string", "fp32", choices=PRECISIONS),
            channels_last=st.get("channels_last", "bool", False),
        ),
        stitcher=st.get("stitcher", "string", "affine", choices=sorted(STITCHERS)),
        indices=indices,
        similarity_samples=st.get("similarity_samples", "integer", None, low=5, nullable=True),
        ood=_read_ood(st, path),
        layouts=_read_layouts(st, path, indices),
        dm_samples=st.get("dm_samples", "integer", None, low=1, nullable=True),
        points=st.raw.get("stitch_points", "all"),
        end_points=end_points,
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
    o = Section(raw, f"{path}.ood", {"outliers", "train_size", "epochs", "oe_epochs", "samples"})
    return dict(
        outliers=tuple(o.get_list("outliers", "string", ["noise"], choices=sorted(["noise", *DATASETS]))),
        train_size=o.get("train_size", "integer", None, low=10, nullable=True),
        epochs=o.get("epochs", "integer", 3, low=1),
        oe_epochs=o.get("oe_epochs", "integer", 2, low=1),
        samples=o.get("samples", "integer", None, low=10, nullable=True),
    )


def _read_layouts(st: Section, path: str, indices: tuple[str, ...]) -> dict[str, str]:
    raw = st.get("layouts", "mapping", {})
    lay = Section(raw, f"{path}.layouts", set(LAYOUT_INDICES))
    for k in raw:
        if k not in indices:
            raise SpecError(
                f"{path}.layouts.{k}",
                f"a layout of an index the block lists ({list(indices)})",
                raw[k],
                f"add {k} to indices",
            )
    return {k: lay.get(k, "string", "auto", choices=LAYOUTS) for k in LAYOUT_INDICES if k in indices}


def _read_pairs(raw: Any, path: str, donors: dict[str, DonorSpec], end_points: Any) -> list:
    """[(front, end, data roles)] of the block's `pairs`, each checked for a stitchable combination."""
    if not isinstance(raw, list) or not raw:
        raise SpecError(f"{path}.pairs", "a non-empty list of {front: REF, end: REF}", raw)
    pairs = []
    for i, praw in enumerate(raw):
        ppath = f"{path}.pairs[{i}]"
        ps = Section(praw, ppath, {"front", "end", "data"})
        front = resolve_ref(ps.get("front", "string"), f"{ppath}.front", donors)
        end = resolve_ref(ps.get("end", "string"), f"{ppath}.end", donors)
        # Same-layer stitching (end_points: same) needs the same stitch points on both sides: the same
        # architecture, or two layouts of one (preact_resnet18 and RobustBench's dm_preact_resnet18, say).
        if end_points == "same" and (
            ARCHITECTURES[front.arch].stitch_points() != ARCHITECTURES[end.arch].stitch_points()
        ):
            raise SpecError(
                ppath,
                "front and end with the same stitch points (end_points: same)",
                f"{front.arch} -> {end.arch}",
                "set end_points: all (or a list) to stitch across layers and architectures",
            )
        fi, ei = DATASETS[front.data.dataset], DATASETS[end.data.dataset]
        if (fi.channels, fi.image_size, fi.num_classes) != (ei.channels, ei.image_size, ei.num_classes):
            raise SpecError(
                ppath,
                "front and end trained on data of one input shape and class count",
                f"{front.data.dataset} {(fi.channels, fi.image_size, fi.num_classes)} -> "
                f"{end.data.dataset} {(ei.channels, ei.image_size, ei.num_classes)}",
                "(channels, image size, classes) must agree for cross-task stitching",
            )
        roles = ps.raw.get("data", "sweep")
        roles = roles if isinstance(roles, list) and roles else [roles]
        for k, role in enumerate(roles):
            where = f"{ppath}.data" + (f"[{k}]" if isinstance(ps.raw.get("data"), list) else "")
            if role not in STITCH_DATA and not (role == "sweep" and "data" not in ps.raw):
                raise SpecError(
                    where, "whose data trains and tests the stitcher: 'front', 'end' or a list of both", role
                )
        pairs.append((front, end, roles))
    return pairs


def _stitch_points(raw: Any, arch: str, path: str) -> list[str]:
    valid = ARCHITECTURES[arch].stitch_points()
    if raw == "all":
        return valid
    if not isinstance(raw, list) or not raw:
        raise SpecError(path, "'all' or a non-empty list of names", raw)
    for k, p in enumerate(raw):
        if p not in valid:
            raise SpecError(f"{path}[{k}]", f"a stitch point of {arch}: one of {valid}", p, did_you_mean(p, valid))
    return list(raw)


def _layer_pairs(points: list[str], end_points: Any, end_arch: str, path: str) -> list[tuple[str, str]]:
    if end_points == "same":
        return [(p, p) for p in points]
    valid = ARCHITECTURES[end_arch].stitch_points()
    ends = valid if end_points == "all" else end_points
    for k, q in enumerate(ends):
        if q not in valid:
            raise SpecError(f"{path}[{k}]", f"a stitch point of {end_arch}: one of {valid}", q, did_you_mean(q, valid))
    return [(p, q) for p in points for q in ends]


def _per_data(block: _Block, objective: str, alpha: float, beta: float, tdata: DataSpec) -> dict:
    """The fields of one (objective, alpha, beta) on the data that trains and tests the stitcher; the fields
    the objective does not read are blanked (so editing them neither changes nor reruns its trials)."""
    path, uses = block.path, set(OBJECTIVES[objective].fields)
    n_train, n_test = tdata.sizes()
    # the DM distance index is the K-image DM stitcher's error out of sample: it needs K as well
    if "dm_samples" in uses or (block.gradient["init"] == "dm" and "init" in uses) or "dm" in block.indices:
        uses.add("dm_samples")
    dm_samples = (
        (block.dm_samples if block.dm_samples is not None else min(100, n_train)) if "dm_samples" in uses else None
    )
    if dm_samples is not None and dm_samples > n_train:
        raise SpecError(f"{path}.dm_samples", f"at most the {n_train} training images of {tdata.dataset}", dm_samples)
    if block.indices and (block.similarity_samples or 0) > n_test:
        raise SpecError(
            f"{path}.similarity_samples",
            f"at most the {n_test} test images of {tdata.dataset}",
            block.similarity_samples,
        )
    adv = dict(block.adversarial, alpha=alpha, beta=beta)
    paper_eps, paper_step = DATASETS[tdata.dataset].threat
    if adv["adv_step_size"] is None:
        adv["adv_step_size"] = scaled_step(adv["adv_eps"], paper_eps, paper_step)
    if adv["adv_random_start"] is None:  # Madry et al. start at a random point; the reference code did not
        adv["adv_random_start"] = OBJECTIVES[objective].random_start
    return dict(
        seed_used="seed" in uses,
        dm_samples=dm_samples,
        **{k: (v if k in uses else None) for k, v in {**block.gradient, **adv}.items()},
        **_ood_fields(block.ood, tdata, f"{path}.ood"),
        similarity_samples=(block.similarity_samples or min(1000, n_test)) if block.indices else None,
    )


def _ood_fields(ood: dict | None, tdata: DataSpec, path: str) -> dict:
    if ood is None:
        return {}
    n_train, n_test = tdata.sizes()
    info = DATASETS[tdata.dataset]
    train_size, samples = ood["train_size"] or min(2000, n_train), ood["samples"] or min(500, n_test)
    for k, name in enumerate(ood["outliers"]):
        oi = DATASETS[name] if name != "noise" else info
        if name != "noise" and (
            (oi.channels, oi.image_size) != (info.channels, info.image_size) or name == tdata.dataset
        ):
            raise SpecError(
                f"{path}.outliers[{k}]",
                f"'noise' or a dataset other than {tdata.dataset} with"
                f" {info.channels}x{info.image_size}x{info.image_size} images",
                name,
            )
    if train_size > n_train:
        raise SpecError(f"{path}.train_size", f"at most the {n_train} training images of {tdata.dataset}", train_size)
    if samples > n_test:
        raise SpecError(f"{path}.samples", f"at most the {n_test} test images of {tdata.dataset}", samples)
    return dict(
        ood_outliers=ood["outliers"],
        ood_train_size=train_size,
        ood_epochs=ood["epochs"],
        ood_oe_epochs=ood["oe_epochs"],
        ood_samples=samples,
    )


def _trial(
    block: _Block,
    per_data: dict,
    evaluation: EvalSpec,
    front: DonorSpec,
    end: DonorSpec,
    role: str,
    tdata: DataSpec,
    objective: str,
    seed: int,
    point: str,
    end_point: str,
) -> TrialSpec:
    fields = dict(per_data)
    seed_used = fields.pop("seed_used")
    if fields["dm_samples"] is not None:
        _check_dm_samples(
            f"{block.path}.dm_samples", fields["dm_samples"], tdata.dataset, front.arch, point, end.arch, end_point
        )
    valid, end_valid = ARCHITECTURES[front.arch].stitch_points(), ARCHITECTURES[end.arch].stitch_points()
    return TrialSpec(
        dataset=tdata.dataset,
        train_size=tdata.train_size,
        val_size=tdata.val_size,
        test_size=tdata.test_size,
        front=front.ref,
        end=end.ref,
        front_key=front.donor_key,
        end_key=end.donor_key,
        front_point=point,
        end_point=end_point,
        objective=objective,
        seed=seed if seed_used else 0,  # a deterministic objective (dm) runs once, not per seed
        **fields,
        stitcher=block.stitcher,
        indices=block.indices,
        **{
            f"{k}_layout": _layout(v, tdata.dataset, front.arch, point, end.arch, end_point)
            for k, v in block.layouts.items()
        },
        attacks=evaluation.attacks,
        eps=evaluation.eps,
        attack_iterations=evaluation.iterations,
        attack_restarts=evaluation.restarts,
        n_eval_robust=evaluation.n_eval_robust,
        **block.numerics,
        point_index=valid.index(point) + 1,
        n_points=len(valid),
        end_index=end_valid.index(end_point) + 1,
        n_end_points=len(end_valid),
        front_dataset=front.data.dataset,
        end_dataset=end.data.dataset,
        stitch_data=role,
        front_eval=DonorEval.of(tdata if front.data.dataset == tdata.dataset else front.data, evaluation),
        end_eval=DonorEval.of(tdata if end.data.dataset == tdata.dataset else end.data, evaluation),
    )
