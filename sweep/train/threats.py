"""The threat models an adversary may work in: one registered entry each (`THREATS`), naming its attack, what
its budget `eps` measures and its default step. Adversarial training (`sweep.train.donors`), adversarial
representations and the training-similarity units (`sweep.kinds`) craft their examples through `craft`.

`linf` and `l2` are PGD on pixels in [0, 1] (Madry et al.); `jpeg`, `gabor` and `snow` are the attacks of Kang
et al. 2019 (`sweep.train.unforeseen`), the other threat models of Cianfarani et al. 2022 Section 6.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from sweep.registry import THREATS
from sweep.train import unforeseen
from sweep.train.attacks import pgd_l2, pgd_linf

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


def register_threat(name: str, attack: Callable, budget: str, default_step, description: str) -> Threat:
    return THREATS.add(name, Threat(name, attack, budget, default_step, description))


def _scaled(eps: float, steps: int) -> float:
    return 2.5 * eps / steps


register_threat("linf", pgd_linf, "the L-inf radius on pixels in [0, 1]", _scaled, "L-inf PGD (Madry et al.)")
register_threat("l2", pgd_l2, "the L2 radius per image, pixels in [0, 1]", _scaled, "L2 PGD (Madry et al.)")
register_threat(
    "jpeg",
    unforeseen.jpeg_linf,
    "the L-inf bound on the quantised JPEG coefficients",
    _scaled,
    "L-inf JPEG (Kang et al. 2019)",
)
register_threat(
    "gabor",
    unforeseen.gabor,
    "the noise amplitude on pixels in [0, 1] (Kang et al.'s 0..255 budgets / 255)",
    lambda eps, steps: VARIABLE_TRAVEL / steps,
    "Gabor noise (Kang et al. 2019)",
)
register_threat(
    "snow",
    unforeseen.snow,
    "the snow layer's weight (Kang et al.'s budgets)",
    lambda eps, steps: VARIABLE_TRAVEL / steps,
    "Snow (Kang et al. 2019)",
)


def attack(threat: str, model: nn.Module, x, y, eps, step_size, steps, generator=None) -> torch.Tensor:
    """The registered attack of `threat` on one batch."""
    return THREATS.get_entry(threat).attack(model, x, y, eps, step_size, steps, generator=generator)


def craft(
    threat: str,
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    eps: float,
    step_size: float,
    steps: int,
    seed: int,
    device: torch.device,
    batch: int = 250,
) -> torch.Tensor:
    """Adversarial examples of `threat` for all of (x, y), in batches of `batch` on `device`, random starts
    drawn from `seed`; returned on the CPU."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(0, len(x), batch):
        xb, yb = x[i : i + batch].to(device), y[i : i + batch].to(device)
        out.append(attack(threat, model, xb, yb, eps, step_size, steps, generator=gen).cpu())
    return torch.cat(out)
