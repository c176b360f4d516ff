"""`TrialSpec`: one stitching configuration, frozen, its scientific fields hashed into `trial_id`."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

from sweep.config.donors import DonorEval
from sweep.config.fields import index_revisions, stable_hash
from sweep.store.schema import SCHEMA_VERSION


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
    beta: float | None = None  # trades
    adv_eps: float | None = None  # adversarial objectives: the PGD inner maximisation (Balogh & Jelasity 2023 A.3)
    adv_step_size: float | None = None
    adv_steps: int | None = None
    adv_random_start: bool | None = None
    stitcher: str = "affine"  # "affine" | "bn_affine_bn" (Bansal et al.)
    # the stitcher's optimiser (gradient objectives): Balogh & Jelasity 2023 A.5 = A.2's settings with Adam
    optimizer: str | None = None  # "adam" | "sgd"
    weight_decay: float | None = None
    momentum: float | None = None  # sgd only
    lr_schedule: str | None = None  # "step" (lr / 10 at 1/3 and 2/3 of the epochs) | "constant"
    indices: tuple[str, ...] = ()  # similarity indices between f<=i and g<=j on held-out images
    similarity_samples: int | None = None
    # how PWCCA and OPD see activations ("positions": one row per image and position, "pooled", "flatten");
    # default as the reference code of Balogh & Jelasity 2025: positions when both shapes match, pooled otherwise
    pwcca_layout: str | None = None
    opd_layout: str | None = None
    ood_outliers: tuple[str, ...] = ()  # OOD AUROC of the stitched activations (Balogh & Jelasity 2025 Section 4)
    ood_train_size: int | None = None
    ood_epochs: int | None = None
    ood_oe_epochs: int | None = None
    ood_samples: int | None = None
    ood_detector: str | None = None  # None: the small detector; "paper": ResNet-18 / ViT-Ti blocks
    # the objective's own parameters (`Objective.params`), sorted (key, value) pairs; none for the built-in
    # objectives, and then left out of the hash, so adding the field changed no trial id
    params: tuple[tuple[str, object], ...] = ()
    # the indices' permutation null (shuffles of the target's images); 0, the default, is left out of the hash
    permutations: int = 0
    # index mknn's neighbours per image (the block's `mknn_k`); None, the default (10), is left out of the hash
    mknn_k: int | None = None
    # bookkeeping: not part of the identity (the donor keys already fix the donors and their datasets; the
    # names are labels, and two names for one donor are refused)
    point_index: int = field(default=0, compare=False)
    n_points: int = field(default=0, compare=False)
    end_index: int = field(default=0, compare=False)
    n_end_points: int = field(default=0, compare=False)
    front_dataset: str = field(default="", compare=False)
    end_dataset: str = field(default="", compare=False)
    stitch_data: str = field(default="", compare=False)  # "sweep" | "front" | "end": whose data trains it
    # Which donors-table rows this trial reads: a donor trained on this trial's dataset is evaluated on the
    # trial's own test images and settings; one trained on another task (cross-task) on its own test set.
    front_eval: DonorEval | None = field(default=None, compare=False)
    end_eval: DonorEval | None = field(default=None, compare=False)
    # the ids of those rows (`DonorEval.eval_id`: their parts' names), computed here, when the space is parsed, so
    # that the worker reads them rather than hashing again; set from the evaluations, never given
    front_eval_id: str | None = field(default=None, init=False, compare=False)
    end_eval_id: str | None = field(default=None, init=False, compare=False)
    # a noise sender (Smith & Marcu 2024): its settings, which its front_key already hashes
    noise_sigma: float | None = field(default=None, compare=False)
    noise_train_per_class: int | None = field(default=None, compare=False)
    noise_test_per_class: int | None = field(default=None, compare=False)
    noise_seed: int | None = field(default=None, compare=False)

    # Not part of the identity: labels (the donors' names: front_key / end_key identify them), layout
    # bookkeeping, and settings that do not change the maths (channels_last is a memory format).
    NON_SCIENTIFIC = (
        "front",
        "end",
        "channels_last",
        "point_index",
        "n_points",
        "end_index",
        "n_end_points",
        "front_dataset",
        "end_dataset",
        "stitch_data",
        "front_eval",
        "end_eval",
        "front_eval_id",
        "end_eval_id",
        "noise_sigma",
        "noise_train_per_class",
        "noise_test_per_class",
        "noise_seed",
    )

    def __post_init__(self) -> None:
        for side in ("front", "end"):
            ev = getattr(self, f"{side}_eval")
            object.__setattr__(self, f"{side}_eval_id", ev.eval_id(getattr(self, f"{side}_key")) if ev else None)

    def _options(self) -> str:
        """The options that tell this trial's configuration apart, as ' key=value' words."""
        opts = "".join(f" {k}={v:g}" for k, v in (("alpha", self.alpha), ("beta", self.beta)) if v is not None)
        opts += f" init={self.init}" if self.init not in (None, "random") else ""
        opts += f" stitcher={self.stitcher}" if self.stitcher != "affine" else ""
        opts += f" on={self.dataset}" if self.stitch_data in ("front", "end") else ""
        return opts + "".join(f" {k}={v}" for k, v in self.params)

    @property
    def label(self) -> str:
        """One line for humans: pair, point, objective and the options that distinguish it."""
        at = self.front_point if self.end_point == self.front_point else f"{self.front_point}->{self.end_point}"
        return f"{self.front} -> {self.end} @{at} {self.objective}{self._options()} seed={self.seed}"

    @property
    def group(self) -> str:
        """The label without point and seed: what `plan`'s summary counts trials under."""
        return f"{self.front} -> {self.end} {self.objective}{self._options()}"

    @property
    def layouts(self) -> dict:
        """Index -> the layout this trial sets for it (`pwcca_layout`, `opd_layout`; None: the index's own)."""
        return {"pwcca": self.pwcca_layout, "opd": self.opd_layout}

    @functools.cached_property  # a frozen spec: computed once (planning a space reads it many times per trial)
    def trial_id(self) -> str:
        fields = dataclasses.asdict(self)
        for k in self.NON_SCIENTIFIC:
            fields.pop(k)
        if not self.params:
            fields.pop("params")
        if not self.permutations:
            fields.pop("permutations")
        if self.mknn_k is None:  # added later: unset, the old ids hold
            fields.pop("mknn_k")
        if self.ood_detector is None:  # added later: unset, the old ids hold
            fields.pop("ood_detector")
        if revisions := index_revisions(self.indices):
            fields["index_revisions"] = revisions
        return stable_hash({"kind": "stitch-trial", "v": SCHEMA_VERSION, **fields})
