"""The donor sources besides the zoo: checkpoint files (`file:`), RobustBench models (`robustbench:`) and
clustered-noise senders (`noise:`, Smith & Marcu 2024), and the registry entries of all four (`DONOR_SOURCES`)."""

from __future__ import annotations

import difflib
import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.config.data import DataSpec
from sweep.config.donors import ZOO_OPTIONS, DonorSpec, parse_zoo_donor
from sweep.config.errors import SpecError
from sweep.config.evaluation import EvalSpec
from sweep.config.fields import Option, Section, by_key
from sweep.registry import ARCHITECTURES, DONOR_SOURCES, lazy

robustbench_models = lazy("sweep.models.external:robustbench_models")
load_checkpoint = lazy("sweep.models.external:load_checkpoint")


# The fields of the donors read from checkpoints (each source's marker first).
FILE_OPTIONS = by_key(
    (
        Option("file", "string", doc="a PyTorch state dict"),
        Option("arch", "string", choices=lambda: ARCHITECTURES),
        Option("mean", "number", (0.0,), many=True, doc="the normalisation the weights expect"),
        Option("std", "number", (1.0,), many=True, low=1e-12),
        Option("trust_pickle", "bool", False, doc="unpickle a checkpoint in full (runs the file's code)"),
    )
)
ROBUSTBENCH_OPTIONS = by_key(
    (
        Option("robustbench", "string", doc="'<dataset>/<threat_model>/<model name>'"),
        Option("arch", "string", choices=lambda: ARCHITECTURES, doc="the layout its weights fit"),
        Option("model_dir", "string", "models", doc="RobustBench's model folder"),
    )
)
SALMAN_OPTIONS = by_key(
    (
        Option("salman", "string", doc="Salman et al. 2020's '<arch>_l2_eps<eps>'"),
        Option("model_dir", "string", "models"),
        Option("trust_pickle", "bool", False, doc="unpickle a checkpoint in full (runs the file's code)"),
    )
)


def _parse_file_donor(name: str, raw: Any, data: DataSpec, evaluation: EvalSpec, root, download) -> DonorSpec:
    path = f"donors.{name}"
    s = Section(raw, path, set(FILE_OPTIONS))
    file = Path(s.get("file", "string")).expanduser()
    if not file.is_file():
        raise SpecError(f"{path}.file", "a checkpoint file (a PyTorch state dict)", str(file), "no such file")
    donor = DonorSpec(
        name=name,
        source="file",
        path=str(file.absolute()),
        file_sha256=_filestable_hash(file),
        arch=s.get("arch", "string", choices=sorted(ARCHITECTURES)),
        data=data,
        mean=tuple(s.get_list("mean", "number", [0.0])),
        std=tuple(s.get_list("std", "number", [1.0], low=1e-12)),
        trust_pickle=s.get("trust_pickle", "bool", False),
    )
    unreadable, problem = _misfit(donor.path, donor.file_sha256, donor.arch, data.dataset, donor.trust_pickle)
    if unreadable:
        raise SpecError(f"{path}.file", "a PyTorch state dict loadable with weights_only", str(file), problem)
    if problem:
        raise SpecError(f"{path}.arch", f"an architecture the checkpoint {file} fits", donor.arch, problem)
    return donor


@functools.lru_cache(maxsize=64)
def _misfit(path: str, sha256: str, arch: str, dataset: str, trust_pickle: bool = False) -> tuple[bool, str | None]:
    """(unreadable, why) the checkpoint does not load onto `arch` for `dataset`'s images and classes (None: it
    does). Read once per content: an unreadable file, a wrong `arch`, a layout we cannot map or a wrong class
    count stop `plan`, not a run."""
    from sweep.registry import DATASETS

    info = DATASETS[dataset]
    try:
        load_checkpoint(
            path, arch, in_channels=info.channels, num_classes=info.num_classes, mean=(0.0,), std=(1.0,),
            image_size=info.image_size, trust_pickle=trust_pickle,
        )  # fmt: skip
    except ValueError as exc:
        message = str(exc).removeprefix(f"{path}: ")
        return message.startswith(("expected a state dict", "holds pickled objects")), message
    except Exception as exc:  # torch.load's own: not a checkpoint, or pickled objects weights_only refuses
        return True, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return False, None


def _parse_robustbench_donor(name: str, raw: dict, data: DataSpec, evaluation: EvalSpec, root, download) -> DonorSpec:
    path = f"donors.{name}"

    s = Section(raw, path, set(ROBUSTBENCH_OPTIONS))
    model_id = s.get("robustbench", "string")
    parts = model_id.split("/")
    if len(parts) != 3 or not all(parts):
        raise SpecError(
            f"{path}.robustbench",
            "'<dataset>/<threat_model>/<model name>', e.g. 'cifar10/Linf/Sehwag2021Proxy_R18'",
            model_id,
        )
    dataset, threat, model = parts
    try:
        known = robustbench_models(dataset, threat)
    except ValueError:
        raise SpecError(
            f"{path}.robustbench",
            "a RobustBench dataset (cifar10, cifar100, imagenet) and threat model (Linf, L2, corruptions)",
            f"{dataset}/{threat}",
        ) from None
    if model not in known:
        close = difflib.get_close_matches(model, known, n=5, cutoff=0.5)
        raise SpecError(
            f"{path}.robustbench",
            f"a model RobustBench lists for {dataset}/{threat}",
            model,
            f'e.g. {close or known[:5]}; list all with: python -c "from sweep.models.external import'
            f" robustbench_models; print(robustbench_models('{dataset}', '{threat}'))\"",
        )
    model_dir = Path(s.get("model_dir", "string", "models")).expanduser().absolute()
    return DonorSpec(
        name=name,
        source="robustbench",
        robustbench_id=model_id,
        path=str(model_dir),
        arch=s.get("arch", "string", choices=sorted(ARCHITECTURES)),
        data=data,
    )


# Salman et al. 2020's L2-robust ImageNet checkpoints (Jones et al. 2022 Table 1): name -> (our architecture, its
# eps levels); files `<name>_l2_eps<eps>.ckpt` in the robustness library's layout
SALMAN = {
    "resnet18": ("tv_resnet18", None),
    "resnet50": ("tv_resnet50", None),
    "wide_resnet50_2": ("tv_wide_resnet50_2", None),
    "wide_resnet50_4": ("tv_wide_resnet50_4", None),
    "resnext50_32x4d": ("tv_resnext50_32x4d", ("0", "3")),
    "vgg16_bn": ("tv_vgg16_bn", ("0", "3")),
    "densenet": ("tv_densenet161", ("0", "3")),
    "shufflenet": ("tv_shufflenet_v2_x1_0", ("0", "3")),
    "mobilenet": ("tv_mobilenet_v2", ("0", "3")),
}
SALMAN_EPS = ("0", "0.01", "0.03", "0.05", "0.1", "0.25", "0.5", "1", "3", "5")


def _parse_salman_donor(name: str, raw: dict, data: DataSpec, evaluation: EvalSpec, root, download) -> DonorSpec:
    path = f"donors.{name}"
    s = Section(raw, path, set(SALMAN_OPTIONS))
    ckpt = s.get("salman", "string")
    arch_name, _, eps = ckpt.partition("_l2_eps")
    known = [f"{a}_l2_eps{e}" for a, (_, levels) in SALMAN.items() for e in (levels or SALMAN_EPS)]
    if ckpt not in known:
        close = difflib.get_close_matches(ckpt, known, n=3, cutoff=0.5)
        hint = f"e.g. {close or known[:3]}"
        raise SpecError(f"{path}.salman", "a checkpoint of Salman et al. 2020, '<arch>_l2_eps<eps>'", ckpt, hint)
    if data.dataset != "imagenet":
        raise SpecError(f"{path}.salman", "a donor on ImageNet (data: {dataset: imagenet})", data.dataset)
    return DonorSpec(
        name=name,
        source="salman",
        salman_id=ckpt,
        path=str(Path(s.get("model_dir", "string", "models")).expanduser().absolute()),
        arch=SALMAN[arch_name][0],
        data=data,
        training="pgd_l2" if float(eps) else "plain",
        eps=float(eps) if float(eps) else None,
        trust_pickle=s.get("trust_pickle", "bool", False),
    )


def _filestable_hash(path: Path) -> str:
    """The file's sha256, read once per (path, size, modification time): a rewritten file is hashed again."""
    st = path.stat()
    return _sha256(str(path.absolute()), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class DonorSource:
    """Where a donor's weights come from: a registered entry (or, `network=False`, a sender that is no network:
    Smith & Marcu 2024's clustered noise). `marker`: the field that selects it in a donor's
    mapping (None: the default source); `parse(name, raw, data, evaluation, root, download) -> DonorSpec`;
    `build(donor, splits, device, progress, workdir) -> (model, mean, std)`, imported when first called (it
    needs torch; `workdir` is the donor's zoo folder, where a killed training run leaves state to resume
    from); `trains`: whether building it trains a network (else it loads one)."""

    name: str
    marker: str | None
    parse: Callable[..., DonorSpec]
    build: Callable
    describe: Callable[[DonorSpec], str]  # what `plan` says of it after its architecture
    trains: bool = False
    network: bool = True  # False: a sender that is not a network (noise), never built, trained or evaluated
    options: dict | None = None  # the fields of its donor mapping, marker included (the JSON Schema reads them)


# A noise sender's fields (under its `noise:` mapping). The paper does not state sigma: 0.1 is our default.
NOISE_OPTIONS = by_key(
    (
        Option("sigma", "number", 0.1, low=0.0, doc="the noise around each class's base activation"),
        Option("train_per_class", "integer", 6000, low=1, doc="Algorithm 2: 6,000 training samples per class"),
        Option("test_per_class", "integer", 1000, low=1, doc="Algorithm 2: 1,000 test samples per class"),
        Option(
            "seed",
            "integer",
            None,
            low=0,
            nullable=True,
            doc="the samples' own seed, whatever the trial's (null: drawn from the trial's seed, so a stitching "
            "block's seeds vary the samples and the stitcher's initialisation together)",
        ),
    )
)


def _parse_noise_donor(name: str, raw: Any, data: DataSpec, evaluation: EvalSpec, root, download) -> DonorSpec:
    path = f"donors.{name}"
    Section(raw, path, {"noise"})
    s = Section(raw["noise"] if raw["noise"] is not None else {}, f"{path}.noise", set(NOISE_OPTIONS))
    return DonorSpec(
        name=name,
        source="noise",
        arch="",  # not a network: its shapes are the receiver's
        data=data,
        **{f"noise_{k}": s.read(option) for k, option in NOISE_OPTIONS.items()},
    )


def _describe_zoo(d: DonorSpec) -> str:
    extra = f" eps={d.eps:g} step={d.step_size:g} steps={d.steps}" if d.eps is not None else ""
    extra += f" beta={d.beta:g}" if d.beta is not None else ""
    extra += "".join(
        f" {k}={getattr(d, k):g}" if isinstance(getattr(d, k), float) else f" {k}={getattr(d, k)}"
        for k in ("optimizer", "momentum", "weight_decay", "lr_schedule")
        if getattr(d, k) is not None
    )
    return f"{d.training} on {d.data.dataset} (train_size={d.data.train_size}) epochs={d.epochs} seed={d.seed}{extra}"


for _source in (
    DonorSource(
        "zoo",
        None,
        parse_zoo_donor,
        lazy("sweep.train.donors:build_zoo_donor"),
        _describe_zoo,
        trains=True,
        options=ZOO_OPTIONS,
    ),
    DonorSource(
        "file",
        "file",
        _parse_file_donor,
        lazy("sweep.models.external:build_file_donor"),
        lambda d: f"from {d.path}",
        options=FILE_OPTIONS,
    ),
    DonorSource(
        "robustbench",
        "robustbench",
        _parse_robustbench_donor,
        lazy("sweep.models.external:build_robustbench_donor"),
        lambda d: f"from RobustBench {d.robustbench_id} in {d.path}",
        options=ROBUSTBENCH_OPTIONS,
    ),
    DonorSource(
        "salman",
        "salman",
        _parse_salman_donor,
        lazy("sweep.models.external:build_salman_donor"),
        lambda d: f"Salman et al. 2020's {d.salman_id} in {d.path}",
        options=SALMAN_OPTIONS,
    ),
    DonorSource(
        "noise",
        "noise",
        _parse_noise_donor,
        None,
        lambda d: (
            f"clustered noise sigma={d.noise_sigma:g}, {d.noise_train_per_class}/{d.noise_test_per_class}"
            " samples per class" + (f", seed {d.noise_seed}" if d.noise_seed is not None else "")
        ),
        network=False,
        options={"noise": Option("noise", "mapping", None, nullable=True, fields=NOISE_OPTIONS)},
    ),
):
    DONOR_SOURCES.add(_source.name, _source)
