"""The torchvision datasets of the papers: CIFAR-10, SVHN (cropped digits) and MNIST.

Each reads torchvision's own on-disk layout under a root folder (`data.root`), downloading into it when
`data.download` is on. Images are kept as stored, 8-bit pixels (N, C, H, W); what a unit reads becomes [0, 1]
floats (`sweep.data.core.unit_pixels`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from sweep.data.core import Pool, load_mnist_like, load_mnist_like_test


def _cifar10_part(root: Path, download: bool, train: bool) -> tuple[torch.Tensor, torch.Tensor]:
    from torchvision.datasets import CIFAR10

    ds = CIFAR10(str(root), train=train, download=download)
    x = torch.from_numpy(np.ascontiguousarray(ds.data)).permute(0, 3, 1, 2).contiguous()
    return x, torch.tensor(ds.targets, dtype=torch.long)


def cifar10(root: Path, download: bool) -> Pool:
    (train_x, train_y), (test_x, test_y) = _cifar10_part(root, download, True), _cifar10_part(root, download, False)
    return Pool(train_x, train_y, test_x, test_y, 10, (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))


def cifar10_test(root: Path, download: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """CIFAR-10's test batch alone."""
    return _cifar10_part(root, download, False)


def _svhn_part(root: Path, download: bool, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    from torchvision.datasets import SVHN

    ds = SVHN(str(root), split=split, download=download)
    return torch.from_numpy(ds.data), torch.from_numpy(ds.labels.astype(np.int64))


def svhn(root: Path, download: bool) -> Pool:
    """SVHN's cropped single digits (Balogh & Jelasity 2023 A.1: "the single-class version"); the extra split is
    unused."""
    (train_x, train_y), (test_x, test_y) = _svhn_part(root, download, "train"), _svhn_part(root, download, "test")
    return Pool(train_x, train_y, test_x, test_y, 10, (0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970))


def svhn_test(root: Path, download: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """SVHN's test split alone."""
    return _svhn_part(root, download, "test")


def mnist(root: Path, download: bool) -> Pool:
    from torchvision.datasets import MNIST

    MNIST(str(root), train=True, download=download)  # fetches (or checks) the IDX files in MNIST/raw
    return load_mnist_like(root / "MNIST" / "raw", mean=0.1307, std=0.3081)


def mnist_test(root: Path, download: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """MNIST's test set alone (its t10k files)."""
    from torchvision.datasets import MNIST

    MNIST(str(root), train=False, download=download)
    return load_mnist_like_test(root / "MNIST" / "raw")
