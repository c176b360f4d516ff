"""Evaluation of a (stitched or donor) network: clean accuracy, class collapse, robust accuracy."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from sweep.costs.working import CPU_BATCH  # noqa: F401 (images per forward pass of inference on the CPU)
from sweep.data.core import batches
from sweep.data.stream import chunks
from sweep.train.attacks import autoattack_accuracy
from sweep.train.loops import autocast, to_device


def inference_batch(batch_size: int, device: torch.device | str) -> int:
    """The images per forward pass of inference on `device`: `batch_size`, at most `CPU_BATCH` on the CPU. The
    batches start at the caller's first image, so the arithmetic stays a function of the caller's grid."""
    return min(batch_size, CPU_BATCH) if torch.device(device).type == "cpu" else batch_size


def predict(
    model: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    device: torch.device,
    batch_size: int = 500,
    precision: str = "fp32",
    channels_last: bool = False,
) -> torch.Tensor:
    """Predicted classes of `x`, on the device `x` is on (the model must be in eval mode), in batches of
    `batch_size` images (at most `CPU_BATCH` on the CPU)."""
    out = []
    with torch.no_grad(), autocast(device, precision):
        for xb, _ in batches(x, torch.zeros(len(x)), inference_batch(batch_size, device)):
            logits = model(to_device(xb, device, channels_last))
            if not torch.isfinite(logits).all():
                raise FloatingPointError("the network produced non-finite logits")
            out.append(logits.argmax(1))
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.long, device=x.device)


def accuracy(pred: torch.Tensor, y: torch.Tensor) -> float:
    """The share of correct predictions, as an exact ratio (no float32 digits); NaN for no images."""
    return int((pred.cpu() == y.cpu()).sum()) / len(y) if len(y) else float("nan")


def agreement(stitched: torch.Tensor, body: torch.Tensor, head: torch.Tensor, y: torch.Tensor) -> dict:
    """How often the stitched network predicts what the head (end network) predicts: overall, and among the
    images where the body (front network) and the head give the same correct label, the same wrong label, or
    different labels (Jones et al. 2022 4.5, Figs 7-8). A share is NaN where its split is empty."""
    s, b, h, y = (t.cpu() for t in (stitched, body, head, y))
    same, both = s == h, b == h
    splits = {"both_correct": both & (h == y), "both_wrong": both & (h != y), "disagree": ~both}

    def share(mask: torch.Tensor) -> float:
        n = int(mask.sum())
        return int((same & mask).sum()) / n if n else float("nan")

    out = {"head_agreement": share(torch.ones_like(same))}
    for name, mask in splits.items():
        out[f"agree_{name}"], out[f"n_{name}"] = share(mask), int(mask.sum())
    return out


def most_frequent_class(pred: torch.Tensor, num_classes: int) -> tuple[int, float]:
    """The class predicted most often and the fraction of predictions that fall in it (Balogh & Jelasity 2023 Fig.
    4)."""
    counts = torch.bincount(pred, minlength=num_classes)
    cls = int(counts.argmax())
    return cls, float(counts[cls]) / max(1, len(pred))


def robust_accuracy(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    n_eval: int,
    eps: float,
    attacks: tuple[str, ...],
    iterations: int,
    restarts: int,
    seed: int,
    device: torch.device,
) -> float | None:
    """AutoAttack accuracy on the first `n_eval` images (the same subset for donors and stitched nets)."""
    if n_eval == 0:
        return None
    return autoattack_accuracy(
        model,
        x[:n_eval],
        y[:n_eval],
        eps=eps,
        attacks=attacks,
        iterations=iterations,
        restarts=restarts,
        seed=seed,
        device=device,
    )


def activations(
    module,
    x: torch.Tensor,
    device: torch.device,
    batch_size: int = 250,
    precision: str = "fp32",
    channels_last: bool = False,
) -> torch.Tensor:
    """module(x) in eval mode (each submodule's mode is restored after: a half cut from a donor is a new container
    around the donor's own stages, whose modes it must leave as they were), without gradients, in batches of
    `batch_size` images (at most `CPU_BATCH` on the CPU) from the first, under the precision's autocast (fp32
    outputs as float32), into one preallocated tensor."""
    batch_size = inference_batch(batch_size, device)
    modes = [(m, m.training) for m in module.modules()] if isinstance(module, torch.nn.Module) else []
    if modes:
        module.eval()
    out = None
    try:
        with torch.no_grad(), autocast(device, precision):
            for i, xb in zip(range(0, len(x), batch_size), chunks(x, batch_size)):
                a = module(to_device(xb, device, channels_last))
                a = a.float() if precision == "fp32" else a
                if out is None:
                    fmt = torch.channels_last if channels_last and a.dim() == 4 else torch.contiguous_format
                    out = torch.empty((len(x), *a.shape[1:]), dtype=a.dtype, device=a.device, memory_format=fmt)
                out[i : i + len(a)] = a
    finally:
        for m, training in modes:
            m.training = training
    return out if out is not None else torch.zeros(0, device=device)
