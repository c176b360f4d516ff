"""The stitching registries as a search space is checked against them, without PyTorch: the objectives
(`OBJECTIVES`: the trial fields each reads, its own parameters, whether it starts from direct matching) and
the stitching layers (`STITCHERS`). Each objective's fit is named ("module:function") and imported the first
time it runs; `register_objective` adds one of your own (a function `fit(ctx) -> metrics`, or its name)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sweep.config.fields import Option
from sweep.registry import OBJECTIVES, STITCHERS, lazy

STITCHERS.add(
    "affine", "an affine map: a 1x1 convolution with bias, a per-token linear map, or a linear map of vectors"
)
STITCHERS.add("bn_affine_bn", "BatchNorm -> affine map -> BatchNorm (Bansal et al.; Smith & Marcu 2024)")

GRADIENT_FIELDS = {
    "epochs",
    "lr",
    "batch_size",
    "init",
    "donor_bn",
    "seed",
    "stitcher",
    "optimizer",
    "weight_decay",
    "momentum",
    "lr_schedule",
}
ATTACK_FIELDS = {"adv_eps", "adv_step_size", "adv_steps", "adv_random_start"}


@dataclass(frozen=True)
class Objective:
    """A registered objective: how it fits the stitcher, and what validation needs to know about it."""

    name: str
    fit: Callable  # (FitContext) -> metrics
    fields: frozenset[str]  # the TrialSpec fields it reads; the others are blanked in its trials
    description: str
    dm_init: bool = False  # the stitcher is always solved by direct matching first (as `init: dm`)
    random_start: bool = True  # the default of `adv_random_start` for objectives that read it
    # Its own parameters, beyond the shared TrialSpec fields: each a block option (`Option`: type, default,
    # bounds) that only this objective reads. Their values are part of its trials' identity and are recorded
    # in the `params` column; `ctx.params` hands them to `fit`.
    params: tuple[Option, ...] = ()


def register_objective(
    name: str,
    fields: set[str],
    description: str,
    *,
    dm_init: bool = False,
    random_start: bool = True,
    params: tuple[Option, ...] = (),
    version: str | None = None,
):
    """Decorator: register `fit(ctx) -> metrics` (or its "module:function" name) as objective `name`
    (`version`: a string to bump when it changes; default: its plugin module's)."""
    return OBJECTIVES.register(
        name,
        lambda fn: Objective(
            name, lazy(fn) if isinstance(fn, str) else fn, frozenset(fields), description, dm_init, random_start,
            tuple(params),
        ),
        version,
    )  # fmt: skip


_FIT = "sweep.stitching.objectives"
register_objective(
    "tlm",
    GRADIENT_FIELDS,
    "task loss matching (Balogh & Jelasity 2023 Eq. 1): cross-entropy of the stitched net, Adam, lr/10 at 1/3 and 2/3",
)(f"{_FIT}:fit_task_loss")
register_objective(
    "dm+tlm",
    (GRADIENT_FIELDS - {"init"}) | {"dm_samples"},
    "direct matching init on K training images, then task loss matching (Balogh & Jelasity 2025 3.1)",
    dm_init=True,
)(f"{_FIT}:fit_task_loss")
register_objective(
    "adv",
    GRADIENT_FIELDS | ATTACK_FIELDS | {"alpha"},
    "adversarial stitching (Balogh & Jelasity 2023 Eq. 2): (1-alpha) CE(clean) + alpha CE(PGD) on every batch",
)(f"{_FIT}:fit_adversarial")
register_objective(
    "adv_mix",
    GRADIENT_FIELDS | ATTACK_FIELDS | {"alpha"},
    "the reference code's adversarial stitching: round(alpha*B) of each batch replaced by PGD examples",
    random_start=False,  # the reference code's PGD started at x
)(f"{_FIT}:fit_adversarial_mixed")
register_objective(
    "trades",
    GRADIENT_FIELDS | (ATTACK_FIELDS - {"adv_random_start"}) | {"beta"},  # starts at x + 0.001 N
    "TRADES stitching (Balogh & Jelasity 2023 Eq. 5): CE(clean) + beta KL(p(x) || p(x')), x' from KL-PGD",
)(f"{_FIT}:fit_trades")
register_objective(
    "dm",
    {"dm_samples", "stitcher"},
    "direct matching (Balogh & Jelasity 2025 Eq. 2-3): float64 least squares over K training images",
)(f"{_FIT}:direct_match")
