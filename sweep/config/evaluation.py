"""The `evaluation` section: how robust accuracy is measured (seed 000 A.4), for donors and trials alike."""

from __future__ import annotations

from dataclasses import dataclass

from sweep.config.fields import Section
from sweep.registry import ATTACKS


@dataclass(frozen=True, kw_only=True)
class EvalSpec:
    attacks: tuple[str, ...]
    eps: float
    iterations: int
    restarts: int
    n_eval_robust: int


def parse_evaluation(raw: dict, default_eps: float, n_test: int) -> EvalSpec:
    """The evaluation section, defaults from the dataset's threat model and test size."""
    e = Section(raw, "evaluation", {"attacks", "eps", "iterations", "restarts", "n_eval_robust"})
    return EvalSpec(
        attacks=tuple(e.get_list("attacks", "string", ["apgd-ce", "apgd-dlr"], choices=sorted(ATTACKS))),
        eps=e.get("eps", "number", default_eps, low=0.0, high=1.0),
        iterations=e.get("iterations", "integer", 20, low=1),
        restarts=e.get("restarts", "integer", 1, low=1),
        n_eval_robust=e.get("n_eval_robust", "integer", min(1000, n_test), low=0, high=n_test),
    )
