"""The `evaluation` section: how robust accuracy is measured (Balogh & Jelasity 2023 A.4), for donors and trials
alike."""

from __future__ import annotations

from dataclasses import dataclass

from sweep.config.errors import SpecError
from sweep.config.fields import Option, Section, by_key
from sweep.registry import ATTACKS

OPTIONS = by_key(
    (
        Option("attacks", "string", ("apgd-ce", "apgd-dlr"), many=True, choices=lambda: ATTACKS),
        Option("eps", "number", None, low=0.0, high=1.0, derived=True, doc="the dataset's: 0.3 (MNIST family), 8/255"),
        Option("iterations", "integer", 20, low=1),
        Option("restarts", "integer", 1, low=1, doc="1: a single run"),
        Option("n_eval_robust", "integer", 1000, low=0, cap="test", doc="0: skip"),
        Option(
            "train_accuracy",
            "bool",
            False,
            doc="true: a donor's own evaluation also on as many training images (Cianfarani et al. 2022 Table 1)",
        ),
    )
)


@dataclass(frozen=True, kw_only=True)
class EvalSpec:
    attacks: tuple[str, ...]
    eps: float
    iterations: int
    restarts: int
    n_eval_robust: int
    train_accuracy: bool = False  # the donors' own evaluation also on training images (the generalisation gap)
    eps_given: bool = True  # False: `eps` is the sweep dataset's default, and donors on other data use theirs


def parse_evaluation(raw: dict, default_eps: float, n_test: int) -> EvalSpec:
    """The evaluation section, defaults from the dataset's threat model and test size."""
    e = Section(raw, "evaluation", set(OPTIONS))
    attacks = tuple(e.read(OPTIONS["attacks"]))
    if "standard" in attacks and len(attacks) > 1:
        raise SpecError("evaluation.attacks", "standard alone (AutoAttack's whole standard version)", list(attacks))
    return EvalSpec(
        attacks=attacks,
        eps=e.read(OPTIONS["eps"], default=default_eps),
        eps_given=e.raw.get("eps") is not None,
        iterations=e.read(OPTIONS["iterations"]),
        restarts=e.read(OPTIONS["restarts"]),
        n_eval_robust=e.read(OPTIONS["n_eval_robust"], default=OPTIONS["n_eval_robust"].capped(n_test), high=n_test),
        train_accuracy=e.read(OPTIONS["train_accuracy"]),
    )
