"""Search space YAML -> validated, expanded, frozen trial specs with stable ids.

The whole space is validated before anything runs: any error is a `SpecError` naming the field, what was
expected and what was found. See README "Search spaces" for the format.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from analysis.schema import SCHEMA_VERSION

from .donors import DonorSpec, parse_donor, resolve_ref
from .errors import SpecError
from .fields import NAME_RE, Section, stable_hash

INITS = ("random", "identity")
DONOR_BN = ("frozen", "update")
PRECISIONS = ("fp32", "bf16")
ATTACKS = ("apgd-ce", "apgd-dlr")


@dataclass(frozen=True, kw_only=True)
class DataSpec:
    dataset: str
    train_size: int | None
    val_size: int
    test_size: int | None


@dataclass(frozen=True, kw_only=True)
class EvalSpec:
    attacks: tuple[str, ...]
    eps: float
    iterations: int
    restarts: int
    n_eval_robust: int


@dataclass(frozen=True, kw_only=True)
class TrialSpec:
    """One stitching configuration. `trial_id` hashes the scientific fields only."""

    dataset: str
    train_size: int | None
    val_size: int
    test_size: int | None
    front: str
    end: str
    front_key: str
    end_key: str
    front_point: str
    end_point: str
    objective: str
    alpha: float | None
    seed: int
    epochs: int | None
    lr: float | None
    batch_size: int | None
    dm_samples: int | None
    init: str | None
    donor_bn: str | None
    attacks: tuple[str, ...]
    eps: float
    attack_iterations: int
    attack_restarts: int
    n_eval_robust: int
    precision: str = "fp32"  # "fp32" | "bf16" (autocast for stitcher training and clean evaluation)
    channels_last: bool = False
    # bookkeeping: not part of the identity
    point_index: int = field(default=0, compare=False)
    n_points: int = field(default=0, compare=False)

    NON_SCIENTIFIC = ("point_index", "n_points")
    # Fields added after the first release: left out of the hash at their defaults, so that adding them
    # did not change (and rerun) every trial recorded before.
    HASHED_UNLESS_DEFAULT = {"precision": "fp32", "channels_last": False}

    @property
    def trial_id(self) -> str:
        fields = dataclasses.asdict(self)
        for k in self.NON_SCIENTIFIC:
            fields.pop(k)
        for k, default in self.HASHED_UNLESS_DEFAULT.items():
            if fields[k] == default:
                fields.pop(k)
        return stable_hash({"kind": "stitch-trial", "v": SCHEMA_VERSION, **fields})


@dataclass(frozen=True, kw_only=True)
class Sweep:
    name: str
    data: DataSpec
    evaluation: EvalSpec
    donors: dict[str, DonorSpec]
    trials: tuple[TrialSpec, ...]
    cpus_per_trial: float
    gpus_per_trial: float
    raw: dict
    data_root: str | None = None  # where datasets are read from (None: $STITCHSWEEP_DATA or the cache)
    download: bool = True


# ---------------------------------------------------------------------------------------------- parsing


def load_space(path: str | Path) -> Sweep:
    """Read, validate and expand a search-space YAML file."""
    p = Path(path)
    if not p.is_file():
        raise SpecError("SPACE", "a search-space YAML file", str(path), "no such file")
    try:
        raw = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(str(path), "valid YAML", f"{problem}{where}") from None
    if not isinstance(raw, dict):
        raise SpecError(str(path), "a mapping of search-space fields (name, data, donors, ...)",
                        raw if raw is not None else "an empty file")
    return parse_space(raw)


def parse_space(raw: Any) -> Sweep:
    """Validate a search space given as a mapping and expand it into trials."""
    from .data import DATASETS
    from .models import stitch_points
    from .objectives import OBJECTIVES

    if not isinstance(raw, dict):
        raise SpecError("search space", "a mapping of search-space fields (name, data, donors, ...)", raw)
    top = Section(raw, "", {"name", "data", "donors", "stitching", "evaluation", "resources"})
    name = top.get("name", "string")
    if not NAME_RE.match(name):
        raise SpecError("name", "letters, digits, '_', '-' or '.'", name)

    d = Section(top.get("data", "mapping"), "data", {"dataset", "train_size", "val_size", "test_size", "root",
                                                      "download"})
    dataset = d.get("dataset", "string", choices=sorted(DATASETS))
    data = DataSpec(
        dataset=dataset,
        train_size=d.get("train_size", "integer", None, low=1, nullable=True),
        val_size=d.get("val_size", "integer", 1000, low=0),
        test_size=d.get("test_size", "integer", None, low=1, high=DATASETS[dataset].test, nullable=True),
    )
    root = d.get("root", "string", None, nullable=True)
    root = str(Path(root).expanduser().absolute()) if root else None
    download = d.get("download", "bool", True)
    if not download:
        from .data import missing_files

        missing = missing_files(data.dataset, Path(root) if root else None)
        if missing:
            raise SpecError("data.root", f"the {data.dataset} files under the data root (download is off)",
                            f"{len(missing)} missing, e.g. {missing[0]}",
                            "set data.download: true once, or copy the dataset there")
    info = DATASETS[data.dataset]
    if data.val_size + (data.train_size or 0) > info.train_pool:
        field = "data.train_size" if data.train_size else "data.val_size"
        raise SpecError(field, f"train_size + val_size at most the {info.train_pool} training images of"
                        f" {data.dataset}", data.val_size + (data.train_size or 0))
    if data.val_size >= info.train_pool:
        raise SpecError("data.val_size", f"fewer than the {info.train_pool} training images of {data.dataset}",
                        data.val_size)
    n_test = min(data.test_size or info.test, info.test)
    n_train = data.train_size or info.train_pool - data.val_size

    e = Section(top.raw.get("evaluation", {}), "evaluation",
                 {"attacks", "eps", "iterations", "restarts", "n_eval_robust"})
    evaluation = EvalSpec(
        attacks=tuple(e.get_list("attacks", "string", ["apgd-ce", "apgd-dlr"], choices=ATTACKS)),
        eps=e.get("eps", "number", low=0.0, high=1.0),
        iterations=e.get("iterations", "integer", 20, low=1),
        restarts=e.get("restarts", "integer", 1, low=1),
        n_eval_robust=e.get("n_eval_robust", "integer", min(1000, n_test), low=0, high=n_test),
    )

    donors_raw = top.get("donors", "mapping")
    if not donors_raw:
        raise SpecError("donors", "a non-empty mapping of donor name -> training config", donors_raw)
    donors = {dname: parse_donor(dname, draw, data, evaluation) for dname, draw in donors_raw.items()}

    st = Section(top.get("stitching", "mapping"), "stitching",
                  {"pairs", "stitch_points", "objectives", "alphas", "seeds", "epochs", "lr", "batch_size",
                   "dm_samples", "init", "donor_bn", "precision", "channels_last"})
    objectives = st.get_list("objectives", "string", choices=sorted(OBJECTIVES))
    alphas = st.get_list("alphas", "number", [0.0], low=0.0, high=1.0)
    seeds = st.get_list("seeds", "integer", [0], low=0)
    common = dict(
        epochs=st.get("epochs", "integer", 30, low=1),
        lr=st.get("lr", "number", 1e-3, low=0.0),
        batch_size=st.get("batch_size", "integer", 128, low=1),
        dm_samples=st.get("dm_samples", "integer", min(100, n_train), low=1, high=n_train),
        init=st.get("init", "string", "random", choices=INITS),
        donor_bn=st.get("donor_bn", "string", "frozen", choices=DONOR_BN),
    )
    numerics = dict(precision=st.get("precision", "string", "fp32", choices=PRECISIONS),
                    channels_last=st.get("channels_last", "bool", False))
    pairs_raw = st.raw.get("pairs")
    if not isinstance(pairs_raw, list) or not pairs_raw:
        raise SpecError("stitching.pairs", "a non-empty list of {front: REF, end: REF}", pairs_raw)
    pairs = []
    for i, praw in enumerate(pairs_raw):
        ps = Section(praw, f"stitching.pairs[{i}]", {"front", "end"})
        front = resolve_ref(ps.get("front", "string"), f"stitching.pairs[{i}].front", donors)
        end = resolve_ref(ps.get("end", "string"), f"stitching.pairs[{i}].end", donors)
        # Same-layer stitching needs the same stitch points on both sides: the same architecture, or two
        # layouts of one (preact_resnet18 and RobustBench's dm_preact_resnet18, say).
        if front.arch != end.arch and stitch_points(front.arch) != stitch_points(end.arch):
            raise SpecError(f"stitching.pairs[{i}]", "front and end with the same stitch points",
                            f"{front.arch} -> {end.arch}",
                            "architectures with different stitch points need cross-layer stitching,"
                            " not supported yet")
        pairs.append((front, end))

    points_raw = st.raw.get("stitch_points", "all")
    trials: dict[str, TrialSpec] = {}
    for (front, end), objective, alpha, seed in itertools.product(pairs, objectives, alphas, seeds):
        valid = stitch_points(front.arch)
        if points_raw == "all":
            points = valid
        else:
            if not isinstance(points_raw, list) or not points_raw:
                raise SpecError("stitching.stitch_points", "'all' or a non-empty list of names", points_raw)
            points = []
            for k, p in enumerate(points_raw):
                if p not in valid:
                    raise SpecError(f"stitching.stitch_points[{k}]",
                                    f"a stitch point of {front.arch}: one of {valid}", p)
                points.append(p)
        uses = OBJECTIVES[objective].fields
        for point in points:
            spec = TrialSpec(
                dataset=data.dataset, train_size=data.train_size, val_size=data.val_size,
                test_size=data.test_size,
                front=front.ref, end=end.ref, front_key=front.donor_key, end_key=end.donor_key,
                front_point=point, end_point=point, objective=objective,
                alpha=alpha if "alpha" in uses else None,
                seed=seed if "seed" in uses else 0,  # a deterministic objective (dm) runs once, not per seed
                **{k: (v if k in uses else None) for k, v in common.items()},
                attacks=evaluation.attacks, eps=evaluation.eps,
                attack_iterations=evaluation.iterations, attack_restarts=evaluation.restarts,
                n_eval_robust=evaluation.n_eval_robust, **numerics,
                point_index=valid.index(point) + 1, n_points=len(valid),
            )
            trials.setdefault(spec.trial_id, spec)  # identical configs (e.g. alpha unused) collapse

    r = Section(top.raw.get("resources", {}), "resources", {"cpus_per_trial", "gpus_per_trial"})
    used = {d.name for pair in pairs for d in pair}
    return Sweep(
        name=name, data=data, evaluation=evaluation,
        donors={k: v for k, v in donors.items() if k in used},
        trials=tuple(trials.values()),
        cpus_per_trial=r.get("cpus_per_trial", "number", 1.0, low=0.0),
        gpus_per_trial=r.get("gpus_per_trial", "number", 0.0, low=0.0),
        raw=raw, data_root=root, download=download,
    )


