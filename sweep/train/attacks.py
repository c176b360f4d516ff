"""Adversarial examples: PGD for adversarial training, AutoAttack (APGD) for robust accuracy.

Inputs are pixels in [0, 1], so `eps` is in pixel units exactly as in the papers (0.3 for (Fashion-)MNIST,
8/255 for CIFAR-10 and SVHN).
"""

from __future__ import annotations

import logging

import torch
from torch import nn

from sweep.costs.working import ATTACK_BATCH
from sweep.data.stream import in_pieces

STANDARD = "standard"


def pgd_linf(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    eps: float,
    step_size: float,
    steps: int,
    random_start: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Untargeted L-inf PGD on the cross-entropy (Madry et al.): returns x + delta, ||delta||_inf <= eps."""
    x = x.detach()
    if random_start:
        noise = torch.rand(x.shape, generator=generator, device="cpu").to(x.device)
        delta = (noise * 2 - 1) * eps
    else:
        delta = torch.zeros_like(x)

    def step(x_adv: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        x_adv = x_adv + step_size * grad.sign()
        return torch.min(torch.max(x_adv, x - eps), x + eps).clamp(0.0, 1.0)

    return _ascend(model, (x + delta).clamp(0.0, 1.0), y, steps, step)


def _ascend(model: nn.Module, x_adv: torch.Tensor, y: torch.Tensor, steps: int, step) -> torch.Tensor:
    """`steps` of gradient ascent on the cross-entropy from `x_adv`; `step(x_adv, grad)` moves and projects."""
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(steps):
        x_adv.requires_grad_(True)
        (grad,) = torch.autograd.grad(loss_fn(model(x_adv), y), x_adv)
        with torch.no_grad():
            x_adv = step(x_adv, grad)
    return x_adv.detach()


def pgd_l2(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    eps: float,
    step_size: float,
    steps: int,
    random_start: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Untargeted L2 PGD on the cross-entropy (Madry et al.): steps of `step_size` along each image's
    L2-normalised gradient, projected onto the L2 ball of radius eps around x and onto [0, 1]; starts at a
    uniformly random point of the ball when `random_start`. Returns x + delta, ||delta||_2 <= eps per image."""
    x = x.detach()
    flat = (-1,) + (1,) * (x.dim() - 1)

    def project(delta: torch.Tensor) -> torch.Tensor:
        norms = delta.flatten(1).norm(dim=1).view(flat)
        return delta * torch.clamp(eps / norms.clamp_min(1e-12), max=1.0)

    if random_start:
        direction = torch.randn(x.shape, generator=generator, device="cpu").to(x.device)
        direction = direction / direction.flatten(1).norm(dim=1).view(flat).clamp_min(1e-12)
        radius = torch.rand(len(x), generator=generator, device="cpu").to(x.device) ** (1.0 / x[0].numel())
        delta = direction * (eps * radius).view(flat)
    else:
        delta = torch.zeros_like(x)

    def step(x_adv: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        grad = grad / grad.flatten(1).norm(dim=1).view(flat).clamp_min(1e-12)
        return (x + project(x_adv + step_size * grad - x)).clamp(0.0, 1.0)

    return _ascend(model, (x + delta).clamp(0.0, 1.0), y, steps, step)


def trades_linf(
    model: nn.Module,
    x: torch.Tensor,
    eps: float,
    step_size: float,
    steps: int,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """TRADES' inner maximisation (Zhang et al. 2019): L-inf PGD on KL(p(x) || p(x')), started at x plus
    0.001 * N(0, 1) noise as in their code; returns x', ||x' - x||_inf <= eps, in [0, 1]."""
    x = x.detach()
    with torch.no_grad():
        p_clean = torch.softmax(model(x), dim=1)
    noise = torch.randn(x.shape, generator=generator, device="cpu").to(x.device)
    x_adv = (x + 0.001 * noise).clamp(0.0, 1.0)
    for _ in range(steps):
        x_adv.requires_grad_(True)
        loss = kl_divergence(p_clean, model(x_adv))
        (grad,) = torch.autograd.grad(loss, x_adv)
        with torch.no_grad():
            x_adv = x_adv + step_size * grad.sign()
            x_adv = torch.min(torch.max(x_adv, x - eps), x + eps).clamp(0.0, 1.0)
    return x_adv.detach()


def kl_divergence(p: torch.Tensor, logits_q: torch.Tensor) -> torch.Tensor:
    """KL(p || softmax(logits_q)), summed over classes and averaged over the batch."""
    return nn.functional.kl_div(torch.log_softmax(logits_q, dim=1), p, reduction="batchmean")


def build_autoattack(
    model: nn.Module,
    *,
    eps: float,
    attacks: tuple[str, ...],
    iterations: int,
    restarts: int,
    seed: int,
    device: torch.device | str,
):
    """pyautoattack's AutoAttack restricted to `attacks`, with APGD built for `iterations` iterations (or, for
    `attacks == ("standard",)`, its standard version as it is).

    pyautoattack's APGD derives its step-size checkpoints (`n_iter_2`, `n_iter_min`, `size_decr`) and
    `n_iter_orig` from `n_iter` in `__init__`; AutoAttack builds its APGDs for 100. Setting `n_iter` afterwards
    leaves a 100-iteration schedule that never fires within 20 iterations (no step-size halving, no restart
    from the best point: a weaker attack). So the APGDs are rebuilt here with the configured budget."""
    from pyautoattack import AutoAttack  # heavy import: only where robust accuracy is asked for
    from pyautoattack.autopgd_base import APGDAttack, APGDAttack_targeted

    if tuple(attacks) == (STANDARD,):  # its own attacks, iterations and restarts
        adversary = AutoAttack(model, norm="Linf", eps=eps, version="standard", seed=seed, device=device)
        adversary.verbose = False
        return adversary
    adversary = AutoAttack(
        model, attacks=list(attacks), device=device, eps=eps, norm="Linf", seed=seed, version="custom"
    )
    adversary.verbose = False
    common = dict(
        n_iter=iterations,
        n_restarts=restarts,
        eps=eps,
        norm="Linf",
        eot_iter=1,
        rho=0.75,
        seed=seed,
        device=device,
        verbose=False,
        logger=adversary.logger,
    )
    adversary.apgd = APGDAttack(model, **common)
    adversary.apgd_targeted = APGDAttack_targeted(model, **common)
    return adversary


PIECE = 1000  # streamed images AutoAttack is given at once (an in-memory tensor is given whole)


def autoattack_accuracy(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    eps: float,
    attacks: tuple[str, ...] = ("apgd-ce", "apgd-dlr"),
    iterations: int = 20,
    restarts: int = 1,
    seed: int = 0,
    batch_size: int = ATTACK_BATCH,
    device: torch.device | str = "cpu",
) -> float:
    """Robust accuracy under AutoAttack restricted to `attacks` (Balogh & Jelasity 2023 A.4: APGD-CE + APGD-DLR).

    `restarts=1` means a single run (no restarts). The model must be in eval mode.
    """
    if len(y) == 0:
        return float("nan")
    logging.getLogger("auto-attack").setLevel(logging.WARNING)
    adversary = build_autoattack(
        model, eps=eps, attacks=attacks, iterations=iterations, restarts=restarts, seed=seed, device=device
    )
    correct, start = 0, 0
    for piece in in_pieces(x, PIECE):  # streamed images: AutoAttack holds a piece at a time, not the split
        yy = y[start : start + len(piece)]
        start += len(piece)
        x_adv, _ = adversary.run_standard_evaluation(piece.to(device), yy.to(device), batch_size=batch_size)
        with torch.no_grad():
            for i in range(0, len(yy), batch_size):
                pred = model(x_adv[i : i + batch_size].to(device)).argmax(1).cpu()
                correct += (pred == yy[i : i + batch_size].cpu()).sum().item()
    return correct / len(y)


def trades_loss(net, x: torch.Tensor, y: torch.Tensor, x_adv: torch.Tensor | None, beta: float) -> torch.Tensor:
    """Balogh & Jelasity 2023 Eq. 5 (TRADES): CE(f(x), y) + beta * KL(f(x) || f(x')), gradients through both terms."""
    logits = net(x)
    loss = nn.functional.cross_entropy(logits, y)
    if beta > 0.0:
        loss = loss + beta * kl_divergence(torch.softmax(logits, dim=1), net(x_adv))
    return loss
