"""Clustered-noise senders (Smith & Marcu 2024, Algorithms 1-2 and B.2): a sender that is not a network.

For a receiver and a stitch point, each class gets a random base activation of the receiver's activation shape
there, uniform on [0, 1) (Algorithm 1); a sample of class c is clamp(base_c + sigma N(0, 1), 0, 1) (Algorithm 2),
`train_per_class` of them per class to train the stitcher and `test_per_class` to test it (the paper: 6,000 and
1,000). The base activations are drawn anew for every (trial seed, receiver, point), "to reduce the likelihood
that results are due to one randomly selected set of points" (B.2). The samples are held in memory: 60,000
activations of the point's size (750 MB at ResNet-18's 64 x 7 x 7; 15.7 GB at VGG-19's features.2).
"""

from __future__ import annotations

import hashlib
import math

import torch

from sweep.data.core import Splits


def noise_seed(seed: int, receiver_key: str, point: str) -> int:
    """The generator seed of one (trial seed, receiver, point)."""
    digest = hashlib.sha256(f"noise|{seed}|{receiver_key}|{point}".encode()).hexdigest()
    return int(digest[:15], 16)


def noise_splits(
    shape: tuple[int, ...],
    num_classes: int,
    sigma: float,
    train_per_class: int,
    test_per_class: int,
    val_size: int,
    seed: int,
) -> Splits:
    """Training, validation (`val_size` samples, balanced) and test samples of clustered noise, the classes in
    turns (0, 1, ..., C-1, 0, 1, ...): whatever reads the first N of a split (the receiver rank's
    `similarity_samples`, a DM fit's `dm_samples`) reads every class, N // C or N // C + 1 samples of each."""
    gen = torch.Generator().manual_seed(seed)
    base = torch.rand((num_classes, *shape), generator=gen)  # Algorithm 1

    def draw(per_class: int) -> tuple[torch.Tensor, torch.Tensor]:  # Algorithm 2
        y = torch.arange(num_classes).repeat(per_class)  # in turns: the first N hold every class
        x = base[y].add_(torch.randn((len(y), *shape), generator=gen), alpha=sigma).clamp_(0.0, 1.0)
        return x, y

    train_x, train_y = draw(train_per_class)
    val_x, val_y = draw(math.ceil(val_size / num_classes) if val_size else 0)
    test_x, test_y = draw(test_per_class)
    return Splits(
        train_x, train_y, val_x, val_y, test_x, test_y, num_classes, (0.0,), (1.0,), split_id=f"noise-{seed:x}"
    )
