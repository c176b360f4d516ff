"""Saliency similarity (Jones et al. 2022 4.4, Fig. 5), a measure of `similarity:` entries only: the cosine
similarity of two models' saliency maps (Simonyan et al. 2014: the gradient of the true class's score, the
logit, with respect to the input pixels), image by image. Its catalogue entry, its math and its registration;
the similarity kind computes it (`similarity_by="saliency"`) and sizes none."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sweep.measures.indices.base import register_index
from sweep.store.catalogue import IndexEntry

if TYPE_CHECKING:
    import torch

ENTRY = IndexEntry(
    "saliency",
    ("saliency_cosine",),
    "saliency",
    "similarity",
    description="mean cosine of the two models' input gradients (saliency maps) on the same images",
    scopes=("similarity",),
)


def saliency(model: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """d logit_y / d x for each image (put the model in eval mode first); the model's parameters get no grad."""
    import torch

    x = x.detach().clone().requires_grad_(True)
    logits = model(x)
    (grad,) = torch.autograd.grad(logits.gather(1, y.view(-1, 1)).sum(), x)
    return grad.detach()


def saliency_cosines(
    model_a, model_b, xa: torch.Tensor, xb: torch.Tensor, y: torch.Tensor, device: torch.device, batch: int = 32
) -> torch.Tensor:
    """Per image, the cosine similarity of A's saliency map on `xa` and B's on `xb` (float64, on the CPU), in
    batches of `batch` (a backward pass through an ImageNet network holds every activation of the batch)."""
    import torch

    from sweep.data.stream import chunks

    out = []
    for ba, bb, yy in zip(chunks(xa, batch), chunks(xb, batch), chunks(y, batch)):
        yy = yy.to(device)
        ga = saliency(model_a, ba.to(device), yy).flatten(1).double()
        gb = saliency(model_b, bb.to(device), yy).flatten(1).double()
        out.append(torch.nn.functional.cosine_similarity(ga, gb, dim=1, eps=1e-30).cpu())
    return torch.cat(out)


INDEX = register_index(ENTRY, saliency_cosines, "flatten", similarity_by="saliency")
