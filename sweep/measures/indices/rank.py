"""The numerical ranks of Smith & Marcu 2024 B.2.1: `rank`, of each donor side's activations at the stitch
point, and `receiver_rank`, of the receiver's first layer after the stitch (measured on the stitched network,
after the fit). Their catalogue entries, the rank's memory and work models, their math and their registration."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sweep.costs.memory import ROW_CHUNK, gram_chunk
from sweep.costs.work import Work
from sweep.measures.indices.base import Network, register_index
from sweep.store.catalogue import IndexEntry

if TYPE_CHECKING:
    import torch

ENTRY = IndexEntry(
    "rank",
    ("rank_front", "rank_end"),
    "rank",
    "rank",
    dtype="int32",
    description="numerical rank of each donor side's channel covariance",
)
RECEIVER_ENTRY = IndexEntry(
    "receiver_rank",
    ("rank_receiver", "rank_receiver_end"),
    "receiver rank",
    "rank",
    dtype="int32",
    description="rank of the receiver's first layer after the stitch (stitched activations), and unstitched",
)


def numbers(rows: int, pa: int, pb: int) -> int:
    """The numerical rank of one side (`pb` unused): Grams when wide, covariances over chunks of rows."""
    return 3 * rows**2 + gram_chunk(rows, pa) if rows < pa else 3 * min(rows, ROW_CHUNK) * pa + 2 * pa * pa


def count(rows: int, pa: int, pb: int = 0) -> Work:
    """The numerical rank of one side (`pb` unused): its Gram or covariance, and their singular values."""
    small = min(rows, pa)
    return Work(calls=1, mac=small * small * max(rows, pa), elem=4 * rows * pa, values=small**3)


def numerical_rank(a, rel_tol: float = 1e-3) -> int:
    """The number of singular values of A's sample covariance above `rel_tol` times the largest (Smith & Marcu 2024
    B.2.1, after Masarczyk et al.). Computed from the singular values s of the centred A (the covariance's are
    s^2 / (n - 1)), as the eigenvalues of the smaller of A_c A_c^T and A_c^T A_c, each accumulated in chunks: a
    wide A never builds the p x p covariance, and a tall one (positions) is never copied to float64 whole.
    Squaring costs nothing here: the threshold (1e-3 of the largest s^2) is far above float64 rounding."""
    import torch

    from sweep.measures.matrices import as_2d, centred_second_moment

    s = torch.linalg.eigvalsh(centred_second_moment(as_2d(a, "A")))
    if s[-1] <= 0:
        return 0
    return int((s > rel_tol * s[-1]).sum())


def receiver_rank(sender, end, x: torch.Tensor, device: torch.device, max_features: int = 8000) -> int:
    """Smith & Marcu 2024 B.2.1: the numerical rank of the receiver's first layer after the stitch (the first
    convolution or linear layer that `end` runs), on what `sender` feeds it for the images `x`: flattened,
    at most `max_features` features sampled with a fixed seed, covariance singular values above 1e-3 of the
    largest."""
    import torch

    from sweep.data.stream import chunks

    first = next((m for m in end.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))), None)
    if first is None:
        raise ValueError("receiver_rank: the end model has no convolution or linear layer after the point")
    captured: list[torch.Tensor] = []

    class _Stop(Exception):
        pass

    def hook(_module, _inputs, output):
        captured.append(output.detach().float().flatten(1).cpu())
        raise _Stop  # nothing after the first layer is needed

    handle = first.register_forward_hook(hook)
    was = end.training
    end.eval()
    try:
        with torch.no_grad():
            for xb in chunks(x, 250):
                try:
                    end(sender(xb.to(device)))
                except _Stop:
                    pass
    finally:
        handle.remove()
        end.train(was)
    acts = torch.cat(captured)
    if acts.shape[1] > max_features:
        keep = torch.randperm(acts.shape[1], generator=torch.Generator().manual_seed(0))[:max_features]
        acts = acts[:, keep]
    return numerical_rank(acts)


def _receiver_ranks(net: Network) -> dict:
    """Smith & Marcu 2024 B.2.1: the receiver's first-layer rank fed by the stitcher, and by its own front."""
    return {
        "rank_receiver": receiver_rank(net.stitched_sender, net.end, net.x, net.device),
        "rank_receiver_end": receiver_rank(
            net.end_front, net.end, net.x if net.x_end is None else net.x_end, net.device
        ),
    }


INDEX = register_index(ENTRY, numerical_rank, "positions", numbers=numbers, count=count)  # B.2.1, each donor side
RECEIVER_INDEX = register_index(RECEIVER_ENTRY, numerical_rank, "flatten", after_fit=_receiver_ranks)
