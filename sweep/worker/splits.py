"""The data a worker keeps: a split moved to its device, the first test images of a dataset, the first training
images of an auxiliary one, each built once per worker and kept by the worker's cache (`sweep.worker.cache`), so
that units that share data share one copy, which none of them changes. What they are is the data layer's
(`sweep.data.core`: `make_splits`, `read_split`, `read_first`, `read_test`).

The dataset they are built from is not kept: with the cache on, it is read for what is built and let go, and
where its loader can (MNIST, Fashion-MNIST, CIFAR-10, SVHN) only what is built is kept of its files as they are
read (a trial worker on 1,000 CIFAR-10 images holds those, not the 50,000; a similarity worker holds its test
images, read from the test files alone). With the
cache off nothing built is kept, so the dataset is (`load_pool`'s per-process copy), as a split is rebuilt from
it for every unit."""

from __future__ import annotations

import dataclasses

import torch

from sweep.data.core import (
    Splits,
    data_root,
    fingerprint,
    load_pool,
    make_splits,
    read_first,
    read_split,
    read_test,
    unit_pixels,
)
from sweep.data.stream import is_stream
from sweep.worker.cache import worker_cache


def _own(x: torch.Tensor) -> torch.Tensor:
    """`x` as [0, 1] floats (`unit_pixels`), in a tensor of its own where it is a view of a larger one (a view
    would keep all of it)."""
    if is_stream(x):
        return x
    own = unit_pixels(x)
    if own.untyped_storage().nbytes() > own.numel() * own.element_size():
        own = own.clone()
    return own


def worker_test_images(
    name: str, n: int | None, *, root: str | None = None, download: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """The first `n` images of a dataset's official test set (all: None) and their labels, what every split's
    test part starts with, kept by the worker's cache as a copy of their own. The dataset is read for them and
    not kept, only its test set where it has a reader of that alone (`read_test`: MNIST, Fashion-MNIST,
    CIFAR-10, SVHN): a unit that reads test images only (a similarity unit, a donor's evaluation) holds those,
    not the training pool and its split, and does not read the training files."""

    def read() -> tuple[torch.Tensor, torch.Tensor]:
        if worker_cache().settings.enabled:  # the test set alone where the dataset can read it so
            x, y = read_test(name, root, download)
        else:
            pool = load_pool(name, root, download)
            x, y = pool.test_x, pool.test_y
        return _own(x[:n]), y[:n].clone()  # a view would keep the whole test set

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
        if worker_cache().settings.enabled:  # only the split's images kept of the files, where the loader can
            splits = read_split(name, train_size, val_size, test_size, root, download)
        else:
            splits = make_splits(name, train_size, val_size, test_size, root=root, download=download)
        own = dict(test_x=_own(splits.test_x), test_y=splits.test_y.clone())
        splits = dataclasses.replace(splits, **own)
        return dataclasses.replace(splits, fingerprint=fingerprint(splits)).to(device)

    return worker_cache().get(key, make)


def worker_train_images(name: str, n: int, *, root: str | None = None, download: bool = True) -> torch.Tensor:
    """The first `n` images of a dataset's training pool (an auxiliary set: OOD outliers), kept by the worker's
    cache as a copy of their own; the dataset is not kept."""

    def read() -> torch.Tensor:
        if worker_cache().settings.enabled:  # those images alone kept of the files, where the loader can
            return _own(read_first(name, n, root, download))
        return _own(load_pool(name, root, download).train_x[:n])

    return worker_cache().get(("train_images", name, n, str(root or data_root())), read)
