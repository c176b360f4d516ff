"""Search space YAML -> validated, expanded, frozen trial specs with stable ids.

The whole space is validated before anything runs: any error is a `SpecError` naming the field, what was
expected and what was found. See README "Search spaces" for the format.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from analysis.schema import SCHEMA_VERSION

from .errors import MISSING, SpecError

TRAINING_METHODS = ("plain", "pgd")
INITS = ("random", "identity")
DONOR_BN = ("frozen", "update")
PRECISIONS = ("fp32", "bf16")
ATTACKS = ("apgd-ce", "apgd-dlr")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


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
class DonorSpec:
    """A donor: trained by the engine (`zoo:<name>`) or read from a checkpoint file (`file:<name>`).

    `donor_key` hashes everything that shapes its weights (for a file: its content, not its path).
    """

    name: str
    arch: str
    data: DataSpec
    source: str = "zoo"  # "zoo" | "file" | "robustbench"
    training: str | None = None
    epochs: int | None = None
    lr: float | None = None
    batch_size: int | None = None
    seed: int | None = None
    eps: float | None = None
    step_size: float | None = None
    steps: int | None = None
    adv_fraction: float | None = None
    augment: tuple[str, ...] = ()
    path: str | None = None  # file: the checkpoint; robustbench: the model folder (not part of the identity)
    file_sha256: str | None = None
    robustbench_id: str | None = None  # "dataset/threat_model/name"
    mean: tuple[float, ...] | None = None  # file donors: the normalisation their weights expect
    std: tuple[float, ...] | None = None

    @property
    def ref(self) -> str:
        return f"{self.source}:{self.name}"

    @property
    def donor_key(self) -> str:
        fields = dataclasses.asdict(self)
        fields.pop("name")  # a name is a label; two donors with the same config share one checkpoint
        fields.pop("path")
        if self.source != "robustbench":  # keys as they were before robustbench donors existed
            fields.pop("robustbench_id")
        if self.source == "zoo":  # keep the keys of zoo donors as they were before file donors existed
            for k in ("source", "file_sha256", "mean", "std"):
                fields.pop(k)
            if not self.augment:
                fields.pop("augment")
        return _hash({"kind": f"{self.source}-donor", "v": SCHEMA_VERSION, **fields})


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
        return _hash({"kind": "stitch-trial", "v": SCHEMA_VERSION, **fields})


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


def _hash(obj: dict) -> str:
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=list)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------- readers


class _Section:
    """Reads typed fields out of one mapping, naming `path.key` in every error, and rejects unknown keys."""

    def __init__(self, raw: Any, path: str, allowed: set[str]) -> None:
        if not isinstance(raw, dict):
            raise SpecError(path, "a mapping", raw)
        self.raw, self.path = raw, path
        unknown = sorted(set(raw) - allowed, key=str)
        if unknown:
            raise SpecError(self.name(str(unknown[0])), f"one of the fields {sorted(allowed)}", unknown[0],
                            "unknown field: misspelt?")

    def name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str, kind: str, default: Any = ..., *, low=None, high=None, choices=None,
            nullable: bool = False) -> Any:
        if key not in self.raw:
            if default is ...:
                raise SpecError(self.name(key), _a(kind), MISSING, "the field is required")
            return default
        return check_value(self.raw[key], self.name(key), kind, low=low, high=high, choices=choices,
                           nullable=nullable)

    def get_list(self, key: str, kind: str, default: Any = ..., **kw) -> list:
        value = self.raw.get(key, default)
        if value is ...:
            raise SpecError(self.name(key), f"a list of {kind}s", MISSING, "the field is required")
        if not isinstance(value, list) or not value:
            raise SpecError(self.name(key), f"a non-empty list of {kind}s", value)
        return [check_value(v, f"{self.name(key)}[{i}]", kind, **kw) for i, v in enumerate(value)]


def _a(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def check_value(value: Any, path: str, kind: str, *, low=None, high=None, choices=None,
                nullable: bool = False) -> Any:
    if value is None and nullable:
        return None
    if kind == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "number":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif kind == "string":
        ok = isinstance(value, str) and value != ""
    elif kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "mapping":
        ok = isinstance(value, dict)
    else:  # pragma: no cover - programming error
        raise TypeError(kind)
    if not ok:
        raise SpecError(path, _a(kind) + (" or null" if nullable else ""), value)
    if choices is not None and value not in choices:
        raise SpecError(path, f"one of {list(choices)}", value)
    if low is not None and value < low or high is not None and value > high:
        lo = "-inf" if low is None else low
        hi = "inf" if high is None else high
        raise SpecError(path, f"{_a(kind)} in [{lo}, {hi}]", value)
    return value


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
    top = _Section(raw, "", {"name", "data", "donors", "stitching", "evaluation", "resources"})
    name = top.get("name", "string")
    if not NAME_RE.match(name):
        raise SpecError("name", "letters, digits, '_', '-' or '.'", name)

    d = _Section(top.get("data", "mapping"), "data", {"dataset", "train_size", "val_size", "test_size", "root",
                                                      "download"})
    data = DataSpec(
        dataset=d.get("dataset", "string", choices=sorted(DATASETS)),
        train_size=d.get("train_size", "integer", None, low=1, nullable=True),
        val_size=d.get("val_size", "integer", 1000, low=0),
        test_size=d.get("test_size", "integer", None, low=1, nullable=True),
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

    e = _Section(top.raw.get("evaluation", {}), "evaluation",
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
    donors = {dname: _parse_donor(dname, draw, data, evaluation) for dname, draw in donors_raw.items()}

    st = _Section(top.get("stitching", "mapping"), "stitching",
                  {"pairs", "stitch_points", "objectives", "alphas", "seeds", "epochs", "lr", "batch_size",
                   "dm_samples", "init", "donor_bn", "precision", "channels_last"})
    objectives = st.get_list("objectives", "string", choices=sorted(OBJECTIVES))
    alphas = st.get_list("alphas", "number", [0.0], low=0.0, high=1.0)
    seeds = st.get_list("seeds", "integer", [0], low=0)
    common = dict(
        epochs=st.get("epochs", "integer", 30, low=1),
        lr=st.get("lr", "number", 1e-3, low=0.0),
        batch_size=st.get("batch_size", "integer", 128, low=1),
        dm_samples=st.get("dm_samples", "integer", 100, low=1),
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
        ps = _Section(praw, f"stitching.pairs[{i}]", {"front", "end"})
        front = _resolve_ref(ps.get("front", "string"), f"stitching.pairs[{i}].front", donors)
        end = _resolve_ref(ps.get("end", "string"), f"stitching.pairs[{i}].end", donors)
        # Same-layer stitching needs the same stitch points on both sides: the same architecture, or two
        # layouts of one (preact_resnet18 and RobustBench's dm_preact_resnet18, say).
        if front.arch != end.arch and stitch_points(front.arch) != stitch_points(end.arch):
            raise SpecError(f"stitching.pairs[{i}]", "front and end with the same stitch points",
                            f"{front.arch} -> {end.arch}",
                            "stitching between different layers (i != j) is not supported yet")
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

    r = _Section(top.raw.get("resources", {}), "resources", {"cpus_per_trial", "gpus_per_trial"})
    used = {d.name for pair in pairs for d in pair}
    return Sweep(
        name=name, data=data, evaluation=evaluation,
        donors={k: v for k, v in donors.items() if k in used},
        trials=tuple(trials.values()),
        cpus_per_trial=r.get("cpus_per_trial", "number", 1.0, low=0.0),
        gpus_per_trial=r.get("gpus_per_trial", "number", 0.0, low=0.0),
        raw=raw, data_root=root, download=download,
    )


def _parse_donor(name: Any, raw: Any, data: DataSpec, evaluation: EvalSpec) -> DonorSpec:
    from .augment import AUGMENTATIONS
    from .models import ARCHITECTURES

    path = f"donors.{name}"
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise SpecError(path, "a donor name of letters, digits, '_', '-' or '.'", name)
    if isinstance(raw, dict) and "robustbench" in raw:
        return _parse_robustbench_donor(name, raw, data, path)
    if isinstance(raw, dict) and "file" in raw:
        s = _Section(raw, path, {"file", "arch", "mean", "std"})
        file = Path(s.get("file", "string")).expanduser()
        if not file.is_file():
            raise SpecError(f"{path}.file", "a checkpoint file (a PyTorch state dict)", str(file),
                            "no such file")
        return DonorSpec(
            name=name, source="file", path=str(file.absolute()), file_sha256=_file_hash(file),
            arch=s.get("arch", "string", choices=sorted(ARCHITECTURES)), data=data,
            mean=tuple(s.get_list("mean", "number", [0.0])), std=tuple(s.get_list("std", "number", [1.0],
                                                                                    low=1e-12)),
        )
    s = _Section(raw, path, {"arch", "training", "epochs", "lr", "batch_size", "seed", "eps", "step_size",
                             "steps", "adv_fraction", "augment"})
    training = s.get("training", "string", "plain", choices=TRAINING_METHODS)
    adv = training == "pgd"
    if not adv:
        for k in ("eps", "step_size", "steps", "adv_fraction"):
            if k in raw:
                raise SpecError(f"{path}.{k}", "no PGD field for training: plain", raw[k],
                                "set training: pgd to train adversarially")
    return DonorSpec(
        name=name,
        arch=s.get("arch", "string", choices=sorted(ARCHITECTURES)),
        data=data,
        training=training,
        epochs=s.get("epochs", "integer", low=1),
        lr=s.get("lr", "number", 0.1, low=0.0),
        batch_size=s.get("batch_size", "integer", 128, low=1),
        seed=s.get("seed", "integer", 0, low=0),
        eps=s.get("eps", "number", evaluation.eps, low=0.0, high=1.0) if adv else None,
        step_size=s.get("step_size", "number", low=0.0) if adv else None,
        steps=s.get("steps", "integer", 10, low=1) if adv else None,
        adv_fraction=s.get("adv_fraction", "number", 1.0, low=0.0, high=1.0) if adv else None,
        augment=tuple(s.get_list("augment", "string", choices=sorted(AUGMENTATIONS))) if raw.get("augment")
        else (),
    )


def _parse_robustbench_donor(name: str, raw: dict, data: DataSpec, path: str) -> DonorSpec:
    from .external import robustbench_models
    from .models import ARCHITECTURES

    s = _Section(raw, path, {"robustbench", "arch", "model_dir"})
    model_id = s.get("robustbench", "string")
    parts = model_id.split("/")
    if len(parts) != 3 or not all(parts):
        raise SpecError(f"{path}.robustbench", "'<dataset>/<threat_model>/<model name>', e.g."
                        " 'cifar10/Linf/Sehwag2021Proxy_R18'", model_id)
    dataset, threat, model = parts
    try:
        known = robustbench_models(dataset, threat)
    except ValueError:
        raise SpecError(f"{path}.robustbench", "a RobustBench dataset (cifar10, cifar100, imagenet) and threat"
                        " model (Linf, L2, corruptions)", f"{dataset}/{threat}") from None
    if model not in known:
        close = [k for k in known if k.lower().startswith(model[:6].lower())][:5]
        raise SpecError(f"{path}.robustbench", f"a model RobustBench lists for {dataset}/{threat}", model,
                        f"e.g. {close or known[:5]}; list all with: python -c \"from sweep.external import"
                        f" robustbench_models; print(robustbench_models('{dataset}', '{threat}'))\"")
    model_dir = Path(s.get("model_dir", "string", "models")).expanduser().absolute()
    return DonorSpec(name=name, source="robustbench", robustbench_id=model_id, path=str(model_dir),
                     arch=s.get("arch", "string", choices=sorted(ARCHITECTURES)), data=data)


@functools.lru_cache(maxsize=64)
def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _resolve_ref(ref: str, path: str, donors: dict[str, DonorSpec]) -> DonorSpec:
    kind, _, name = ref.partition(":")
    if kind not in ("zoo", "file", "robustbench") or not name:
        raise SpecError(path, "a donor reference 'zoo:<name>', 'file:<name>' or 'robustbench:<name>'", ref)
    if name not in donors:
        raise SpecError(path, f"a donor defined under donors: one of {sorted(donors)}", ref)
    if donors[name].source != kind:
        raise SpecError(path, f"'{donors[name].source}:{name}' (donors.{name} is a {donors[name].source} donor)",
                        ref)
    return donors[name]
