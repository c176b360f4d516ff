"""The adversarial inputs a section may ask for (`attack:`): PGD under a threat model, its settings read from the
section, as the similarity, training-similarity and examples kinds read them."""

from __future__ import annotations

from sweep.config.errors import SpecError
from sweep.config.fields import Option, Section, by_key
from sweep.registry import THREATS

ATTACK_OPTIONS = by_key(
    (
        Option("source", "string", "a", doc="a | b | a donor REF: the model the examples are crafted against"),
        Option("threat", "string", "linf", choices=lambda: THREATS, doc="linf | l2 | jpeg | gabor | snow"),
        Option("eps", "number", None, low=0.0, nullable=True, derived=True, doc="null: evaluation.eps (linf)"),
        Option("steps", "integer", 20, low=1),
        Option(
            "step_size", "number", None, low=0.0, nullable=True, derived=True, doc="null: the threat model's default"
        ),
    )
)


def pgd_settings(at: Section, evaluation) -> dict:
    """The attack of an `attack` mapping: threat model, eps (null: the evaluation's, for linf), steps, step (null:
    the threat model's default). The threat model is recorded as `attack_norm`, the name the unit ids hash."""
    threat = at.read(ATTACK_OPTIONS["threat"])
    eps = at.read(ATTACK_OPTIONS["eps"])
    if eps is None and threat != "linf":
        raise SpecError(f"{at.path}.eps", f"{THREATS[threat].budget} ({threat})", "nothing", "the field is required")
    eps = evaluation.eps if eps is None else eps
    steps = at.read(ATTACK_OPTIONS["steps"])
    step_size = at.read(ATTACK_OPTIONS["step_size"])
    return dict(
        attack_norm=threat,
        attack_eps=eps,
        attack_steps=steps,
        attack_step_size=THREATS[threat].default_step(eps, steps) if step_size is None else step_size,
    )
