"""The training-side registries as a search space is checked against them, without PyTorch: the attacks of
robust accuracy (`ATTACKS`), the threat models (`THREATS`), the optimisers (`OPTIMIZERS`) and learning-rate
schedules (`SCHEDULES`), and the donors' training methods (`TRAINING_METHODS`). Each implementation is named
("module:function") and imported the first time it runs (`sweep.registry.lazy`); the `register_*` functions
add entries of your own (with a function, or its name)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from sweep.registry import ATTACKS, OPTIMIZERS, SCHEDULES, THREATS, TRAINING_METHODS, lazy


def _function(fn: Callable | str) -> Callable:
    return lazy(fn) if isinstance(fn, str) else fn


# The attacks of robust accuracy: AutoAttack's components (Balogh & Jelasity 2023 A.4 uses the first two), run
# with `iterations` and `restarts`; `standard` alone is AutoAttack's own standard version (Table 2's right column).
ATTACKS.add("apgd-ce", "APGD on the cross-entropy (Croce & Hein 2020)")
ATTACKS.add("apgd-dlr", "APGD on the difference-of-logits ratio (Croce & Hein 2020)")
ATTACKS.add("apgd-t", "targeted APGD on the DLR loss, 9 target classes (Croce & Hein 2020)")
ATTACKS.add("fab-t", "targeted FAB (Croce & Hein 2020), its own iterations")
ATTACKS.add("square", "Square Attack (Andriushchenko et al. 2020), 5,000 queries")
ATTACKS.add("standard", "AutoAttack's standard version: APGD-CE, APGD-T, FAB-T and Square with their own settings")

# ------------------------------------------------------------------------------------------ threat models

# Kang et al. calibrate Gabor and Snow with 200 steps of 0.002236 on a variable of range about 1: the default
# step of those two spreads the same total movement over the configured steps.
VARIABLE_TRAVEL = 200 * 0.002236


@dataclass(frozen=True)
class Threat:
    name: str
    attack: Callable  # (model, x, y, eps, step_size, steps, generator=) -> x_adv in [0, 1]
    budget: str  # what eps measures
    default_step: Callable[[float, int], float]  # (eps, steps) -> step size
    description: str


def register_threat(name: str, attack: Callable | str, budget: str, default_step, description: str) -> Threat:
    return THREATS.add(name, Threat(name, _function(attack), budget, default_step, description))


def scaled_step(eps: float, steps: int) -> float:
    return 2.5 * eps / steps


def travel_step(eps: float, steps: int) -> float:
    return VARIABLE_TRAVEL / steps


_PGD = "sweep.train.attacks"
register_threat(
    "linf", f"{_PGD}:pgd_linf", "the L-inf radius on pixels in [0, 1]", scaled_step, "L-inf PGD (Madry et al.)"
)
register_threat(
    "l2", f"{_PGD}:pgd_l2", "the L2 radius per image, pixels in [0, 1]", scaled_step, "L2 PGD (Madry et al.)"
)
register_threat(
    "jpeg",
    "sweep.train.unforeseen:jpeg_linf",
    "the L-inf bound on the quantised JPEG coefficients",
    scaled_step,
    "L-inf JPEG (Kang et al. 2019)",
)
register_threat(
    "gabor",
    "sweep.train.unforeseen:gabor",
    "the noise amplitude on pixels in [0, 1] (Kang et al.'s 0..255 budgets / 255)",
    travel_step,
    "Gabor noise (Kang et al. 2019)",
)
register_threat(
    "snow", "sweep.train.unforeseen:snow", "the snow layer's weight (Kang et al.'s budgets)", travel_step,
    "Snow (Kang et al. 2019)",
)  # fmt: skip

# ------------------------------------------------------------------------------- optimisers and schedules


@dataclass(frozen=True)
class Optimizer:
    name: str
    build: Callable  # (params, lr, momentum, weight_decay) -> torch.optim.Optimizer
    momentum: bool  # whether it reads `momentum`
    description: str


def register_optimizer(name: str, build: Callable | str, momentum: bool, description: str) -> Optimizer:
    return OPTIMIZERS.add(name, Optimizer(name, _function(build), momentum, description))


_OPT = "sweep.train.optimizers"
register_optimizer(
    "sgd_nesterov", f"{_OPT}:sgd_nesterov", True, "SGD with Nesterov momentum (Balogh & Jelasity 2023 A.2)"
)
register_optimizer("sgd", f"{_OPT}:sgd", True, "SGD with momentum (Smith & Marcu 2024 B.1)")
register_optimizer("adam", f"{_OPT}:adam", False, "Adam (Balogh & Jelasity 2023 A.5)")
register_optimizer("adamw", f"{_OPT}:adamw", False, "AdamW, decoupled weight decay (Loshchilov & Hutter 2019)")
for _schedule in ("step", "warmup_cosine", "constant", "batch_steps_100_150"):  # (optimiser, epochs) -> scheduler
    SCHEDULES.add(_schedule, lazy(f"{_OPT}:{_schedule}_schedule"))

# ---------------------------------------------------------------------------------- donor training methods


@dataclass(frozen=True)
class TrainingMethod:
    name: str
    loss: Callable  # (model, xb, yb, donor, generator) -> loss; leaves the model in train mode
    fields: frozenset[str]  # the adversarial donor fields it reads
    description: str
    threat: str = "linf"  # the threat model of its attack (`THREATS`): what `eps` means
    # its loss reads only the batch and the model (no generator, no host values): on a GPU the engine may
    # replay its training step from a CUDA graph (`sweep.train.loops.GraphedStep`), which would repeat any
    # random draw made at capture
    capturable: bool = False


def register_training_method(
    name: str, fields: set[str], description: str, threat: str = "linf", capturable: bool = False
):
    """Decorator: register `loss(model, xb, yb, donor, generator)` (or its "module:function" name);
    `capturable`: see `TrainingMethod`."""
    return TRAINING_METHODS.register(
        name, lambda fn: TrainingMethod(name, _function(fn), frozenset(fields), description, threat, capturable)
    )


_ADVERSARIAL = {"eps", "step_size", "steps", "adv_fraction"}
_DONORS = "sweep.train.donors"
register_training_method(
    "plain", set(), "cross-entropy on clean batches (Balogh & Jelasity 2023 A.2)", capturable=True
)(f"{_DONORS}:plain_loss")
register_training_method(
    "pgd",
    _ADVERSARIAL,
    "L-inf PGD adversarial training (Madry et al.; Balogh & Jelasity 2023 A.3); adv_fraction weighs the"
    " adversarial loss against the clean one",
)(functools.partial(lazy(f"{_DONORS}:madry_loss"), "linf"))
register_training_method(
    "pgd_l2",
    _ADVERSARIAL,
    "L2 PGD adversarial training (Madry et al.; the L2 threat model of Cianfarani et al. 2022 Section 6)",
    threat="l2",
)(functools.partial(lazy(f"{_DONORS}:madry_loss"), "l2"))
for _threat, _what in (("jpeg", "L-inf JPEG"), ("gabor", "Gabor"), ("snow", "Snow")):
    register_training_method(
        f"adv_{_threat}",
        _ADVERSARIAL,
        f"adversarial training against the {_what} attack of Kang et al. 2019 (Cianfarani et al. 2022 Section 6)",
        threat=_threat,
    )(functools.partial(lazy(f"{_DONORS}:madry_loss"), _threat))
register_training_method(
    "trades",
    {"eps", "step_size", "steps", "beta"},
    "TRADES (Zhang et al.; Balogh & Jelasity 2023 Eq. 4): CE + beta KL(p(x) || p(x')), KL-PGD for x'",
)(f"{_DONORS}:trades_donor_loss")
