"""The data a worker keeps: a split moved to its device, and the first test images of a dataset, each built once
per worker and kept by the worker's cache (`sweep.worker.cache`), so that units that share data share one copy,
which none of them changes. What they are is the data layer's (`sweep.data.core`: `make_splits`, `read_pool`)."""

from __future__ import annotations

import dataclasses

import torch

from sweep.data.core import Splits, data_root, fingerprint, make_splits, read_pool
from sweep.data.stream import is_stream
from sweep.worker.cache import worker_cache


def worker_test_images(
    name: str, n: int | None, *, root: str | None = None, download: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """The first `n` images of a dataset's official test set (all: None) and their labels, what every split's
    test part starts with, kept by the worker's cache as a copy of their own. The dataset is read for them and
    not kept (`read_pool`): a unit that reads test images only (a similarity unit) holds those, not the
    training pool and its split (CIFAR-10: 1.4 GB as float32 on the host)."""

    def read() -> tuple[torch.Tensor, torch.Tensor]:
        pool = read_pool(name, root, download)
        x, y = pool.test_x[:n], pool.test_y[:n]
        return (x if is_stream(x) else x.clone()), y.clone()  # a view would keep the whole pool alive

    return worker_cache().get(("test_images", name, n, str(root or data_root())), read)


def worker_splits(
    name: str,
    train_size: int | None,
    val_size: int,
    test_size: int | None,
    device: torch.device,
    *,
    root: str | None = None,
    download: bool = True,
) -> Splits:
    """`make_splits(...).to(device)`, built and moved once per worker (the worker's cache keeps it, under the
    dataset's resolved data root): units that share data share one copy, which none of them changes."""
    key = ("splits", name, train_size, val_size, test_size, str(root or data_root()), str(device))

    def make() -> Splits:
        splits = make_splits(name, train_size, val_size, test_size, root=root, download=download)
        return dataclasses.replace(splits, fingerprint=fingerprint(splits)).to(device)

    return worker_cache().get(key, make)
