"""The threat models an adversary may work in: one registered entry each (`THREATS`), naming its attack, what
its budget `eps` measures and its default step. Adversarial training (`sweep.train.donors`), adversarial
representations and the training-similarity units (`sweep.kinds`) craft their examples through `craft`.

`linf` and `l2` are PGD on pixels in [0, 1] (Madry et al.); `jpeg`, `gabor` and `snow` are the attacks of Kang
et al. 2019 (`sweep.train.unforeseen`), the other threat models of Cianfarani et al. 2022 Section 6.
"""

from __future__ import annotations

import torch
from torch import nn

from sweep.costs.working import ATTACK_BATCH
from sweep.data.stream import chunks
from sweep.registry import THREATS
from sweep.train.declared import Threat, register_threat  # noqa: F401  (re-exported)


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
    batch: int = ATTACK_BATCH,
) -> torch.Tensor:
    """Adversarial examples of `threat` for all of (x, y), in batches of `batch` on `device`, random starts
    drawn from `seed`; returned on the CPU."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for xb, yb in zip(chunks(x, batch), chunks(y, batch)):
        xb, yb = xb.to(device), yb.to(device)
        out.append(attack(threat, model, xb, yb, eps, step_size, steps, generator=gen).cpu())
    return torch.cat(out)
