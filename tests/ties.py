"""Claims over argmax that hold on any x86-64 CPU.

A network that reproduces another "up to rounding" (a direct-matching self-stitch: the least-squares map from a
layer into itself, solved in float64 and stored in float32; a stitcher loaded from disk and evaluated in other
batch sizes) changes its logits by float32 rounding, and which way a rounding goes depends on the CPU's kernels
(AVX-512 or AVX2, MKL's code path on Intel or AMD, oneDNN's blocking). An image whose two largest logits are
closer than that change may flip its prediction on one machine and not on another: a claim "the predictions are
the same on every image" is then a claim about the machine.

So such a test counts the end model's near ties, the images whose top-two logit margin is below `TIE_MARGIN`,
and allows that many flips, no more. The margin is a bound with room: a DM self-stitch of the suite's donors
moves the logits by at most ~1e-6 (measured on an AVX-512 and an AVX2 kernel path: 0 to 1e-6; logits of scale
~6), and 1e-3 is three orders of magnitude above it. With the suite's donors (about 90% on the digits) no test
image is that close (smallest margin measured 3e-3 and 2e-2 on the two kernel paths), so on most machines the
bound is exact agreement; where a machine trains a donor with a near tie, the test still holds for the reason it
states.
"""

from __future__ import annotations

import torch

TIE_MARGIN = 1e-3


def margins(logits: torch.Tensor) -> torch.Tensor:
    """Per image: the largest logit minus the second largest."""
    top = logits.topk(2, dim=1).values
    return top[:, 0] - top[:, 1]


def near_ties(logits: torch.Tensor, margin: float = TIE_MARGIN) -> int:
    """How many images a rounding-level change of the logits may flip."""
    return int((margins(logits) < margin).sum())


def count(fraction: float, n: int) -> int:
    """The integer count behind a recorded fraction `count / n` (checked to be one: a fraction that is no count
    of `n` is a bug, and `round` would hide it)."""
    value = fraction * n
    assert abs(value - round(value)) < 1e-6 * max(1, n), (fraction, n)
    return round(value)


def assert_reproduces(row: dict, logits: torch.Tensor, labels: torch.Tensor) -> None:
    """A stitched trial that reproduces its end model up to rounding: on the trial's test images its accuracy
    is the end model's and its predictions are the end model's, but for at most the near ties of `logits` (the
    end model's logits on those images)."""
    n = row["test_size"]
    assert n == len(labels)
    ties = near_ties(logits)
    end_correct = int((logits.argmax(1) == labels).sum())
    assert abs(count(row["clean_acc"], n) - end_correct) <= ties, (row["clean_acc"], end_correct, ties)
    assert abs(row["relative_acc"] - 1.0) <= ties / max(1, end_correct) + 1e-12, (row["relative_acc"], ties)
    if row.get("head_agreement") is not None:  # the stitched network predicts what the end network does
        assert count(row["head_agreement"], n) >= n - ties, (row["head_agreement"], ties)


def end_logits(sweep_dir, spec, root: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """A stitching trial's end model's logits on the trial's test images, and their labels, computed here from the
    donor's checkpoint and the trial's data sizes (independently of the trial's own evaluation)."""
    from sweep.data.core import make_splits
    from sweep.worker.zoo import load_donor

    splits = make_splits(spec.dataset, spec.train_size, spec.val_size, spec.test_size, root=root, download=False)
    with torch.no_grad():
        return load_donor(sweep_dir, spec.end_key, torch.device("cpu"))(splits.test_x), splits.test_y
