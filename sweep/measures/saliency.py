"""Saliency similarity (Jones et al. 2022 4.4, Fig. 5): the cosine similarity of two models' saliency maps
(Simonyan et al. 2014: the gradient of the true class's score, the logit, with respect to the input pixels),
image by image."""

from __future__ import annotations

from collections.abc import Callable

import torch

from sweep.data.stream import chunks


def saliency(model: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """d logit_y / d x for each image (put the model in eval mode first); the model's parameters get no grad."""
    x = x.detach().clone().requires_grad_(True)
    logits = model(x)
    (grad,) = torch.autograd.grad(logits.gather(1, y.view(-1, 1)).sum(), x)
    return grad.detach()


def saliency_cosines(
    model_a, model_b, xa: torch.Tensor, xb: torch.Tensor, y: torch.Tensor, device: torch.device, batch: int = 32
) -> torch.Tensor:
    """Per image, the cosine similarity of A's saliency map on `xa` and B's on `xb` (float64, on the CPU), in
    batches of `batch` (a backward pass through an ImageNet network holds every activation of the batch)."""
    out = []
    for ba, bb, yy in zip(chunks(xa, batch), chunks(xb, batch), chunks(y, batch)):
        yy = yy.to(device)
        ga = saliency(model_a, ba.to(device), yy).flatten(1).double()
        gb = saliency(model_b, bb.to(device), yy).flatten(1).double()
        out.append(torch.nn.functional.cosine_similarity(ga, gb, dim=1, eps=1e-30).cpu())
    return torch.cat(out)
