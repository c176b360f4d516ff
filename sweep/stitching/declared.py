"""The stitching registries as a search space is checked against them, without PyTorch: the objectives
(`OBJECTIVES`: the trial fields each reads, its own parameters, whether it starts from direct matching) and
the stitching layers (`STITCHERS`). Each objective's fit is named ("module:function") and imported the first
time it runs; `register_objective` adds one of your own (a function `fit(ctx) -> metrics`, or its name)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sweep.config.fields import Option
from sweep.registry import ARCHITECTURES, OBJECTIVES, STITCHERS, lazy

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
    # `check(params, end_arch, end_point)`: None, or (option, expected, found) for a value the trial's end
    # network refuses (`plan` names it, exit 2); torch-free, on the architecture's declared points
    check: Callable[[dict, str, str], tuple[str, str, object] | None] | None = None
    # A trial fitting with it leaves both donors as loaded (parameters, BatchNorm statistics, memory format)
    # when `donor_bn` is not `update` and `channels_last` is off: the worker then hands the trial the donors
    # its cache holds instead of a copy of each (`sweep.worker.zoo.load_donor(shared=True)`). Every shipped
    # objective is checked by tests/sweep/worker/test_zoo.py; a plugin's is copied unless it says so.
    leaves_donors: bool = False


def register_objective(
    name: str,
    fields: set[str],
    description: str,
    *,
    dm_init: bool = False,
    random_start: bool = True,
    params: tuple[Option, ...] = (),
    version: str | None = None,
    check: Callable | None = None,
    leaves_donors: bool = False,
):
    """Decorator: register `fit(ctx) -> metrics` (or its "module:function" name) as objective `name`
    (`version`: a string to bump when it changes; default: its plugin module's; `leaves_donors`: its fit changes
    no donor, so trials may share the worker's cached donors)."""
    return OBJECTIVES.register(
        name,
        lambda fn: Objective(
            name, lazy(fn) if isinstance(fn, str) else fn, frozenset(fields), description, dm_init, random_start,
            tuple(params), check, leaves_donors,
        ),
        version,
    )  # fmt: skip


_FIT = "sweep.stitching.objectives"
_ALIGN = "sweep.stitching.alignment"
_LEAVES = dict(leaves_donors=True)  # tests/sweep/worker/test_zoo.py: each leaves its donors as loaded
register_objective(
    "tlm",
    GRADIENT_FIELDS,
    "task loss matching (Balogh & Jelasity 2023 Eq. 1): cross-entropy of the stitched net, Adam, lr/10 at 1/3 and 2/3",
    **_LEAVES,
)(f"{_FIT}:fit_task_loss")
register_objective(
    "dm+tlm",
    (GRADIENT_FIELDS - {"init"}) | {"dm_samples"},
    "direct matching init on K training images, then task loss matching (Balogh & Jelasity 2025 3.1)",
    dm_init=True,
    **_LEAVES,
)(f"{_FIT}:fit_task_loss")
register_objective(
    "adv",
    GRADIENT_FIELDS | ATTACK_FIELDS | {"alpha"},
    "adversarial stitching (Balogh & Jelasity 2023 Eq. 2): (1-alpha) CE(clean) + alpha CE(PGD) on every batch",
    **_LEAVES,
)(f"{_FIT}:fit_adversarial")
register_objective(
    "adv_mix",
    GRADIENT_FIELDS | ATTACK_FIELDS | {"alpha"},
    "the reference code's adversarial stitching: round(alpha*B) of each batch replaced by PGD examples",
    random_start=False,  # the reference code's PGD started at x
    **_LEAVES,
)(f"{_FIT}:fit_adversarial_mixed")
register_objective(
    "trades",
    GRADIENT_FIELDS | (ATTACK_FIELDS - {"adv_random_start"}) | {"beta"},  # starts at x + 0.001 N
    "TRADES stitching (Balogh & Jelasity 2023 Eq. 5): CE(clean) + beta KL(p(x) || p(x')), x' from KL-PGD",
    **_LEAVES,
)(f"{_FIT}:fit_trades")
register_objective(
    "dm",
    {"dm_samples", "stitcher"},
    "direct matching (Balogh & Jelasity 2025 Eq. 2-3): float64 least squares over K training images",
    **_LEAVES,
)(f"{_FIT}:direct_match")
register_objective(
    "slm",
    GRADIENT_FIELDS,
    "soft-label matching (Hinton et al. 2015's distillation loss on the stitch): T^2 KL(softmax(z_end / T) ||"
    " softmax(z_stitched / T)), the end network's logits on the same images",
    params=(Option("temperature", "number", 1.0, low=0.01, doc="the softmax temperature T of slm"),),
    **_LEAVES,
)(f"{_ALIGN}:fit_soft_labels")


def hint_layers(layers, points: list[str], stitch_points: list[str], end_point: str) -> list[str]:
    """FuLA's hint layers of an end network (`fula_layers`, its points input to output): `all`, the stitch
    point j and every stitch point after it; else the names, in the order given."""
    if list(layers) != ["all"]:
        return list(layers)
    after = [p for p in stitch_points if points.index(p) > points.index(end_point)]
    return [end_point, *after]


def check_fula(params: dict, end_arch: str, end_point: str) -> tuple[str, str, object] | None:
    """A hint layer the end network lacks or that lies before the stitch point, or weights that do not
    match the layers (one weight for all, or one per layer, not all zero)."""
    arch = ARCHITECTURES[end_arch]
    points, stitch = arch.points(), arch.stitch_points()
    layers = params["fula_layers"]
    for name in layers:
        if name != "all" and name not in points:
            return "fula_layers", f"'all' or points of {end_arch} ({points})", name
        if name == "all" and len(layers) > 1:
            return "fula_layers", "[all] alone, or a list of points", list(layers)
        if name != "all" and points.index(name) < points.index(end_point):
            return "fula_layers", f"hint layers at or after the stitch point {end_point} of {end_arch}", name
    weights, n = list(params["fula_weights"]), len(hint_layers(layers, points, stitch, end_point))
    if len(weights) not in (1, n) or not any(weights):
        return "fula_weights", f"one weight, or {n} (one per hint layer), not all 0", weights
    return None


register_objective(
    "fula",
    GRADIENT_FIELDS,
    "functional latent alignment (Athanasiadis et al. 2025, our reading): the stitched network's activations at"
    " hint layers of the end network from j on matched to the end network's, a weighted sum of MSEs each"
    " normalised by the end network's energy there",
    params=(
        Option("fula_layers", "string", ("all",), many=True, doc="hint layers of the end network (all: j and after)"),
        Option("fula_weights", "number", (1.0,), low=0.0, many=True, doc="per hint layer (one: uniform)"),
    ),
    check=check_fula,
    **_LEAVES,
)(f"{_ALIGN}:fit_latent_alignment")
