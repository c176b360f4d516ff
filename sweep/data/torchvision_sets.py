"""The torchvision datasets of the papers: CIFAR-10, SVHN (cropped digits) and MNIST.

Each reads torchvision's own on-disk layout under a root folder (`data.root`), downloading into it when
`data.download` is on (torchvision's classes fetch and check the files; CIFAR-10's batches are then read here,
one at a time). Images are kept as stored, 8-bit pixels (N, C, H, W); what a unit reads becomes [0, 1] floats
(`sweep.data.core.unit_pixels`). Each has a reader of its test set alone (`*_test`) and of chosen training
images (`*_rows`: a split keeps its own images of the training files, `sweep.data.core.read_split`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from sweep.data.core import Pool, load_mnist_like, load_mnist_like_rows, load_mnist_like_test, rows_of

CIFAR10_STATS = ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))  # per-channel pixel mean, standard deviation
SVHN_STATS = ((0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970))


def cifar10_test(root: Path, download: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """CIFAR-10's test batch alone (images (N, 3, 32, 32) 8-bit, labels), through torchvision's `CIFAR10`, which
    first checks every file of the dataset (or downloads them): a read of its training batches comes after it."""
    from torchvision.datasets import CIFAR10

    ds = CIFAR10(str(root), train=False, download=download)  # raises on a missing or corrupted file
    x = torch.from_numpy(np.ascontiguousarray(ds.data.transpose(0, 3, 1, 2)))
    return x, torch.tensor(ds.targets, dtype=torch.long)


def _cifar10_train_files(root: Path):
    """CIFAR-10's training batches, checked before (`cifar10_test`), each as (images (N, 3, 32, 32) 8-bit,
    labels), read one at a time (its pickles hold the images channel-first already)."""
    import pickle

    from torchvision.datasets import CIFAR10

    for name, _ in CIFAR10.train_list:
        with open(root / CIFAR10.base_folder / name, "rb") as fh:
            entry = pickle.load(fh, encoding="latin1")
        yield torch.from_numpy(entry["data"]).view(-1, 3, 32, 32), torch.tensor(entry["labels"], dtype=torch.long)


def cifar10(root: Path, download: bool) -> Pool:
    test = cifar10_test(root, download)
    parts = list(_cifar10_train_files(root))
    train = torch.cat([x for x, _ in parts]), torch.cat([y for _, y in parts])
    return Pool(*train, *test, 10, *CIFAR10_STATS)


def cifar10_rows(root: Path, download: bool, index: torch.Tensor) -> tuple[Pool, int]:
    """CIFAR-10 with only the training images at `index`, its five training batches read one at a time."""
    test = cifar10_test(root, download)
    train_x, train_y, n = rows_of(_cifar10_train_files(root), index)
    return Pool(train_x, train_y, *test, 10, *CIFAR10_STATS), n


def _svhn_part(root: Path, download: bool, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    from torchvision.datasets import SVHN

    ds = SVHN(str(root), split=split, download=download)
    return torch.from_numpy(ds.data), torch.from_numpy(ds.labels.astype(np.int64))


def svhn(root: Path, download: bool) -> Pool:
    """SVHN's cropped single digits (Balogh & Jelasity 2023 A.1: "the single-class version"); the extra split is
    unused."""
    (train_x, train_y), (test_x, test_y) = _svhn_part(root, download, "train"), _svhn_part(root, download, "test")
    return Pool(train_x, train_y, test_x, test_y, 10, *SVHN_STATS)


def svhn_test(root: Path, download: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """SVHN's test split alone."""
    return _svhn_part(root, download, "test")


def svhn_rows(root: Path, download: bool, index: torch.Tensor) -> tuple[Pool, int]:
    """SVHN with only the training images at `index` (its training file is one MATLAB file: read whole, let go)."""
    train_x, train_y, n = rows_of([_svhn_part(root, download, "train")], index)
    return Pool(train_x, train_y, *svhn_test(root, download), 10, *SVHN_STATS), n


MNIST_STATS = (0.1307, 0.3081)


def mnist(root: Path, download: bool) -> Pool:
    from torchvision.datasets import MNIST

    MNIST(str(root), train=True, download=download)  # fetches (or checks) the IDX files in MNIST/raw
    return load_mnist_like(root / "MNIST" / "raw", *MNIST_STATS)


def mnist_rows(root: Path, download: bool, index: torch.Tensor) -> tuple[Pool, int]:
    """MNIST with only the training images at `index` (torchvision fetches or checks its files first)."""
    from torchvision.datasets import MNIST

    MNIST(str(root), train=False, download=download)  # the test part: what it reads to check is the smaller
    return load_mnist_like_rows(root / "MNIST" / "raw", *MNIST_STATS, index)


def mnist_test(root: Path, download: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """MNIST's test set alone (its t10k files)."""
    from torchvision.datasets import MNIST

    MNIST(str(root), train=False, download=download)
    return load_mnist_like_test(root / "MNIST" / "raw")
