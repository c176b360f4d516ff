"""The expansion of a stitching block into trials (pairs x data x objectives x alphas x betas x seeds x stitch
points x end points), each a `TrialSpec` hashed into its `trial_id`. The block's options are read by
`block.py`; names of objectives, indices, stitchers and architectures are looked up in their registries."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from sweep.config.data import DataSpec
from sweep.config.donors import DonorEval, DonorSpec, resolve_ref, scaled_step
from sweep.config.errors import SpecError
from sweep.config.evaluation import EvalSpec
from sweep.config.fields import Section
from sweep.config.shapes import activation_shape, channels, check_dm_samples, layout
from sweep.config.trial import TrialSpec
from sweep.kinds.trial.block import OOD_OPTIONS, OPTIONS, Block, read_block
from sweep.registry import ARCHITECTURES, DATASETS, OBJECTIVES

if TYPE_CHECKING:
    from sweep.config.context import SpaceContext

STITCH_DATA = ("front", "end")


def expand_block(
    raw: Any, path: str, data: DataSpec, evaluation: EvalSpec, donors: dict[str, DonorSpec], used: set[str]
) -> list[TrialSpec]:
    """One stitching block: pairs x stitch data x objectives x alphas x betas x seeds x stitch points."""
    block = read_block(raw, path, evaluation)
    pairs = _read_pairs(raw.get("pairs"), path, donors, block.end_points)
    used.update(name for front, end, _ in pairs for name in (front.name, end.name))
    trials = []
    for front, end, roles in pairs:
        if not front.network:
            _check_noise_block(block, path)
        points = _stitch_points(block.points, _sender_arch(front, end), f"{path}.stitch_points")
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
        if not end.network:
            raise SpecError(f"{ppath}.end", "a network to stitch into (a noise sender can only send)", end.ref)
        if not front.network and (end_points != "same" or "data" in ps.raw):
            raise SpecError(
                ppath, "a noise sender stitched at the receiver's own points (end_points: same, no data)", front.ref
            )
        if end_points == "same" and (
            ARCHITECTURES[_sender_arch(front, end)].stitch_points() != ARCHITECTURES[end.arch].stitch_points()
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


def _refuse_identity(path: str, source: str, src: tuple, target: str, tgt: tuple) -> None:
    raise SpecError(
        f"{path}.init",
        "a stitcher that can start as the identity: equal channel counts",
        f"{source} ({channels(src)} channels) to {target} ({channels(tgt)})",
        "use init: random or dm",
    )


def _sender_arch(front: DonorSpec, end: DonorSpec) -> str:
    """The architecture whose points and shapes the sender has: its own, or, for a noise sender (shaped like
    the receiver's activations), the receiver's."""
    return front.arch if front.network else end.arch


def _check_noise_block(block: Block, path: str) -> None:
    """What a noise sender cannot do: direct matching and attacks need images both sides see, similarity
    indices the sender's activations on images (only the receiver rank, measured after the fit, applies), OOD
    detection too. Its stitchers train by the task loss."""
    needs_images = [
        o for o in block.objectives if {"dm_samples", "adv_eps"} & set(OBJECTIVES[o].fields) or OBJECTIVES[o].dm_init
    ]
    if needs_images or block.gradient.get("init") == "dm":
        found = needs_images or "init: dm"
        raise SpecError(f"{path}.objectives", "tlm with a noise sender (no images for DM or attacks)", found)
    before_fit = [name for name in block.indices if name != "receiver_rank"]
    if before_fit:
        raise SpecError(f"{path}.indices", "only receiver_rank with a noise sender (it sees no images)", before_fit)
    if block.ood:
        raise SpecError(f"{path}.ood", "no OOD detection with a noise sender (it sees no images)", block.ood)


def _stitch_points(raw: Any, arch: str, path: str) -> list[str]:
    if raw == "all":
        return ARCHITECTURES[arch].stitch_points()
    valid = ARCHITECTURES[arch].points()  # `penultimate` by name
    if not isinstance(raw, list) or not raw:
        raise SpecError(path, "'all' or a non-empty list of names", raw)
    for k, p in enumerate(raw):
        if p not in valid:
            hint = ARCHITECTURES[arch].point_hint(p, valid)
            raise SpecError(f"{path}[{k}]", f"a stitch point of {arch}: one of {valid}", p, hint)
    return list(raw)


def _layer_pairs(points: list[str], end_points: Any, end_arch: str, path: str) -> list[tuple[str, str]]:
    if end_points == "same":
        return [(p, p) for p in points]
    valid = ARCHITECTURES[end_arch].points()
    ends = ARCHITECTURES[end_arch].stitch_points() if end_points == "all" else end_points
    for k, q in enumerate(ends):
        if q not in valid:
            hint = ARCHITECTURES[end_arch].point_hint(q, valid)
            raise SpecError(f"{path}[{k}]", f"a stitch point of {end_arch}: one of {valid}", q, hint)
    return [(p, q) for p in points for q in ends]


def _per_data(block: Block, objective: str, alpha: float, beta: float, tdata: DataSpec) -> dict:
    """The fields of one (objective, alpha, beta) on the data that trains and tests the stitcher; the fields
    the objective does not read are blanked (so editing them neither changes nor reruns its trials)."""
    path, uses = block.path, set(OBJECTIVES[objective].fields)
    n_train, n_test = tdata.sizes()
    # the DM distance index is the K-image DM stitcher's error out of sample: it needs K as well
    if "dm_samples" in uses or (block.gradient["init"] == "dm" and "init" in uses) or "dm" in block.indices:
        uses.add("dm_samples")
    k_default = OPTIONS["dm_samples"].capped(n_train)
    dm_samples = (block.dm_samples if block.dm_samples is not None else k_default) if "dm_samples" in uses else None
    if dm_samples is not None and dm_samples > n_train:
        raise SpecError(f"{path}.dm_samples", f"at most the {n_train} training images of {tdata.dataset}", dm_samples)
    if block.indices and (block.similarity_samples or 0) > n_test:
        raise SpecError(
            f"{path}.similarity_samples",
            f"at most the {n_test} test images of {tdata.dataset}",
            block.similarity_samples,
        )
    similarity_samples = (
        (block.similarity_samples or OPTIONS["similarity_samples"].capped(n_test)) if block.indices else None
    )
    if block.mknn_k is not None and block.mknn_k >= similarity_samples:
        raise SpecError(
            f"{path}.mknn_k", f"fewer neighbours than the {similarity_samples} similarity_samples", block.mknn_k
        )
    adv = dict(block.adversarial, alpha=alpha, beta=beta)
    paper_eps, paper_step = DATASETS[tdata.dataset].threat
    if adv["adv_step_size"] is None:
        adv["adv_step_size"] = scaled_step(adv["adv_eps"], paper_eps, paper_step)
    if adv["adv_random_start"] is None:  # Madry et al. start at a random point; the reference code did not
        adv["adv_random_start"] = OBJECTIVES[objective].random_start
    params = tuple((o.key, block.params.get(o.key, o.default)) for o in OBJECTIVES[objective].params)
    return dict(
        params=tuple(sorted(params)),
        seed_used="seed" in uses,
        dm_samples=dm_samples,
        **{k: (v if k in uses else None) for k, v in {**block.gradient, **adv}.items()},
        **_ood_fields(block.ood, tdata, f"{path}.ood"),
        similarity_samples=similarity_samples,
        mknn_k=block.mknn_k,
    )


def _ood_fields(ood: dict | None, tdata: DataSpec, path: str) -> dict:
    if ood is None:
        return {}
    n_train, n_test = tdata.sizes()
    info = DATASETS[tdata.dataset]
    train_size = ood["train_size"] or OOD_OPTIONS["train_size"].capped(n_train)
    samples = ood["samples"] or OOD_OPTIONS["samples"].capped(n_test)
    for k, name in enumerate(ood["outliers"]):
        if name == "random300k" and (info.channels, info.image_size) != (3, 32):
            raise SpecError(f"{path}.outliers[{k}]", "random300k with 3x32x32 images (CIFAR-10, SVHN)", tdata.dataset)
        oi = DATASETS[name] if name not in ("noise", "random300k") else info
        if name not in ("noise", "random300k") and (
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
        ood_detector=None if ood["detector"] == "small" else ood["detector"],  # small: the ids of before
    )


def _check_params(path: str, objective: str, params: dict, end: DonorSpec, end_point: str) -> None:
    """The objective's own options against this end network and point (`Objective.check`)."""
    check = OBJECTIVES[objective].check
    problem = check(params, end.arch, end_point) if check else None
    if problem:
        raise SpecError(f"{path}.{problem[0]}", problem[1], problem[2], f"{objective} at {end.ref} @{end_point}")


def _trial(
    block: Block,
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
    seed_used = (fields := dict(per_data)).pop("seed_used")
    sender = _sender_arch(front, end)
    src, tgt = activation_shape(sender, tdata.dataset, point), activation_shape(end.arch, tdata.dataset, end_point)
    if fields["dm_samples"] is not None:
        check_dm_samples(f"{block.path}.dm_samples", fields["dm_samples"], [src], [tgt], f"from {point} to {end_point}")
    if fields.get("init") == "identity" and channels(src) != channels(tgt):
        _refuse_identity(block.path, f"{front.ref} @{point}", src, f"{end.ref} @{end_point}", tgt)
    _check_params(block.path, objective, dict(fields["params"]), end, end_point)
    valid, end_valid = ARCHITECTURES[sender].points(), ARCHITECTURES[end.arch].points()
    n_valid, n_end_valid = len(ARCHITECTURES[sender].stitch_points()), len(ARCHITECTURES[end.arch].stitch_points())
    return TrialSpec(
        **tdata.fields(),
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
        permutations=block.permutations,
        **{
            f"{k}_layout": layout(v, tdata.dataset, sender, point, end.arch, end_point)
            for k, v in block.layouts.items()
        },
        attacks=evaluation.attacks,
        eps=evaluation.eps,
        attack_iterations=evaluation.iterations,
        attack_restarts=evaluation.restarts,
        n_eval_robust=evaluation.n_eval_robust if front.network else 0,  # no attack on noise
        **block.numerics,
        point_index=valid.index(point) + 1,  # `penultimate`: n_points + 1
        n_points=n_valid,
        end_index=end_valid.index(end_point) + 1,
        n_end_points=n_end_valid,
        front_dataset=front.data.dataset,
        end_dataset=end.data.dataset,
        stitch_data=role,
        front_eval=DonorEval.of(tdata if front.data.dataset == tdata.dataset else front.data, evaluation)
        if front.network
        else None,
        **{f"noise_{k}": getattr(front, f"noise_{k}") for k in ("sigma", "train_per_class", "test_per_class", "seed")},
        end_eval=DonorEval.of(tdata if end.data.dataset == tdata.dataset else end.data, evaluation),
    )


def read_stitching(raw: Any, ctx: SpaceContext) -> tuple:
    """The `stitching` section: one block (a mapping) or a list of blocks; identical configurations collapse."""
    if not isinstance(raw, (dict, list)) or isinstance(raw, list) and not raw:
        raise SpecError("stitching", "a mapping, or a non-empty list of mappings (blocks)", raw)
    blocks = [(raw, "stitching")] if isinstance(raw, dict) else [(b, f"stitching[{i}]") for i, b in enumerate(raw)]
    trials: dict[str, TrialSpec] = {}
    for block, path in blocks:
        for spec in expand_block(block, path, ctx.data, ctx.evaluation, ctx.donors, ctx.used):
            trials.setdefault(spec.trial_id, spec)  # identical configs (e.g. alpha unused) collapse
    return tuple(trials.values())
