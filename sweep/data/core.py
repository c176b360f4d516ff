"""Datasets as tensors of pixels in [0, 1] (N, C, H, W), with deterministic, recorded splits.

A `Pool` (a dataset as read) may keep its images in their stored dtype, 8-bit pixels (CIFAR-10's 60,000 images:
184 MB, not 737 MB as float32). A split cut from it keeps its training and validation images so (`stored`:
`sweep.data.stream.Stored`, converted batch by batch as they are read); its test images, and the first test
images a unit reads alone, become [0, 1] floats when they are cut (`unit_pixels`). Either way the floats a unit
computes with are the same bits as converting the whole dataset first. A split is cut from the whole pool
(`make_splits`), or read with only its own images kept of the training files where the dataset's loader can
(`read_split`, `DatasetInfo.load_rows`), the same images either way.

Registered datasets:
- `fashion_mnist`: the 70,000 images of Fashion-MNIST, read from the IDX files of the Debian package
  `dataset-fashion-mnist` (/usr/share/datasets/fashion-mnist), from `$STITCHSWEEP_DATA/fashion-mnist`, or,
  failing both, through torchvision's `FashionMNIST(root, download=True)` (needs the network once).
- `digits`: scikit-learn's 1,797 8x8 digits (shipped inside scikit-learn), scaled to [0, 1] and resized
  bilinearly to 28x28 so that they fit the same networks as Fashion-MNIST.
- `cifar10`, `svhn`, `mnist`: through torchvision (`sweep.data.torchvision_sets`), from a root folder,
  downloading there when allowed.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from sweep.data.declared import (  # noqa: F401  (re-exported: where the data layer's names have lived)
    MNIST_FILES,
    DatasetInfo,
    data_root,
    fashion_candidates,
    find_idx_dir,
    missing_files,
    register_dataset,
)
from sweep.data.stream import Images, Stored, chunks, is_stream
from sweep.registry import DATASETS

SPLIT_SEED = 0  # the split is part of the data, not of a trial: one fixed permutation per dataset


@dataclass(frozen=True)
class Pool:
    """A dataset before splitting: a training pool and the official test set (tensors, or streamed `Images`
    for image folders: `sweep.data.stream`). Image tensors are [0, 1] floats or 8-bit pixels (0-255, uint8,
    converted by `unit_pixels` where a part of them is cut)."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]

    @property
    def in_channels(self) -> int:
        return int(self.train_x.shape[1])


@dataclass(frozen=True)
class Splits:
    train_x: torch.Tensor
    train_y: torch.Tensor
    val_x: torch.Tensor
    val_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    split_id: str
    fingerprint: str = ""  # of the images' content (`fingerprint`), set by `sweep.worker.splits.worker_splits`

    @property
    def in_channels(self) -> int:
        return int(self.train_x.shape[1])

    @property
    def image_size(self) -> int:
        return int(self.train_x.shape[-1])

    def to(self, device: torch.device) -> Splits:
        """The same splits on `device`. On a GPU the in-memory datasets fit (CIFAR-10: 0.6 GB as floats, 0.15 GB
        as stored), so a trial moves them once instead of copying every batch; streamed images stay files, decoded
        and moved batch by batch."""
        if device.type == "cpu":
            return self
        parts = ("train_x", "train_y", "val_x", "val_y", "test_x", "test_y")
        moved = {f: _moved(getattr(self, f), device) for f in parts}
        return dataclasses.replace(self, **moved)


def _moved(x, device: torch.device):
    return x.moved(device) if is_stream(x) else x.to(device)  # streamed files stay files: their batches move


def stored(x: torch.Tensor):
    """8-bit images kept as they are, standing where [0, 1] floats would (`stream.Images` over a `stream.Stored`:
    converted batch by batch as a consumer reads them); anything else as it is."""
    return Images(Stored(x)) if not is_stream(x) and x.dtype == torch.uint8 else x


def unit_pixels(x: torch.Tensor) -> torch.Tensor:
    """Images as [0, 1] floats: 8-bit pixels divided by 255 (elementwise, so a part converted is bit-identical to
    the same part of the whole dataset converted), anything else (floats, streamed `Images`) as it is."""
    return x.float().div_(255) if not is_stream(x) and x.dtype == torch.uint8 else x


def _read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (the MNIST family's format), gzipped or not."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        raw = fh.read()
    if raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{path}: header says {shape}, file holds {data.size} values")
    return data.reshape(shape)


def _idx_file(d: Path, stem: str) -> Path:
    gz = d / f"{stem}.gz"
    return gz if gz.exists() else d / stem


def _idx_part(directory: Path, prefix: str) -> tuple[torch.Tensor, torch.Tensor]:
    """One part of an MNIST-format dataset, `train` or `t10k`: its images (8-bit, as stored) and labels."""
    x = torch.from_numpy(_read_idx(_idx_file(directory, f"{prefix}-images-idx3-ubyte")).copy()).unsqueeze(1)
    y = torch.from_numpy(_read_idx(_idx_file(directory, f"{prefix}-labels-idx1-ubyte")).astype(np.int64))
    return x, y


def load_mnist_like(directory: Path, mean: float, std: float) -> Pool:
    """Load an MNIST-format dataset (four IDX files) from a directory, as the files store it (8-bit pixels)."""
    (train_x, train_y), (test_x, test_y) = _idx_part(directory, "train"), _idx_part(directory, "t10k")
    return Pool(train_x, train_y, test_x, test_y, num_classes=10, mean=(mean,), std=(std,))


def load_mnist_like_test(directory: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """An MNIST-format dataset's test set alone (its two t10k files)."""
    return _idx_part(directory, "t10k")


def load_mnist_like_rows(directory: Path, mean: float, std: float, index: torch.Tensor) -> tuple[Pool, int]:
    """An MNIST-format dataset with only the training images at `index` (`DatasetInfo.load_rows`)."""
    train_x, train_y, n = rows_of([_idx_part(directory, "train")], index)
    test_x, test_y = load_mnist_like_test(directory)
    return Pool(train_x, train_y, test_x, test_y, num_classes=10, mean=(mean,), std=(std,)), n


def _fashion_dir(root: Path, download: bool, train: bool = True) -> Path:
    found = find_idx_dir(fashion_candidates(root))
    if found is None:
        from torchvision.datasets import FashionMNIST

        FashionMNIST(str(root), train=train, download=download)  # raises with the missing path if absent
        found = root / "FashionMNIST" / "raw"
    return found


FASHION_STATS = (0.2860, 0.3530)  # Fashion-MNIST's pixel mean and standard deviation


def fashion_mnist(root: Path, download: bool) -> Pool:
    """Fashion-MNIST from ROOT/fashion-mnist, ROOT/FashionMNIST/raw or Debian's package, else torchvision."""
    return load_mnist_like(_fashion_dir(root, download), *FASHION_STATS)


def fashion_mnist_rows(root: Path, download: bool, index: torch.Tensor) -> tuple[Pool, int]:
    """Fashion-MNIST with only the training images at `index`, from where `fashion_mnist` reads it."""
    return load_mnist_like_rows(_fashion_dir(root, download), *FASHION_STATS, index)


def fashion_mnist_test(root: Path, download: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Fashion-MNIST's test set alone, from where `fashion_mnist` reads it."""
    return load_mnist_like_test(_fashion_dir(root, download, train=False))


def digits(root: Path, download: bool) -> Pool:
    """scikit-learn's digits (shipped inside scikit-learn: root and download do not apply)."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = torch.from_numpy(bunch.images.astype(np.float32) / 16.0).unsqueeze(1)
    x = torch.nn.functional.interpolate(x, size=(28, 28), mode="bilinear", align_corners=False)
    x = x.clamp_(0.0, 1.0)
    y = torch.from_numpy(bunch.target.astype(np.int64))
    # sklearn ships no official test split: a fixed permutation holds out 20%.
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(SPLIT_SEED))
    n_test = len(y) // 5
    test, train = perm[:n_test], perm[n_test:]
    return Pool(x[train], y[train], x[test], y[test], 10, (0.1,), (0.25,))


@functools.lru_cache(maxsize=4)
def load_pool(name: str, root: str | None = None, download: bool = True) -> Pool:
    """Load a registered dataset from `root` (default: $STITCHSWEEP_DATA or ~/.cache/stitchsweep/data),
    downloading what is missing when `download` is on (cached per process: `read_pool` reads without keeping)."""
    return read_pool(name, root, download)


def read_pool(name: str, root: str | None = None, download: bool = True) -> Pool:
    """`load_pool`'s dataset read now and not kept by this module."""
    return DATASETS.get_entry(name).load(_base(name, root, download), download)


def _base(name: str, root: str | None, download: bool) -> Path:
    """The dataset's data root; without `download`, a FileNotFoundError naming the files missing there."""
    base = Path(root) if root else data_root()
    if not download and (missing := missing_files(name, base)):
        raise FileNotFoundError(
            f"dataset {name!r}: missing {[str(m) for m in missing[:4]]} under {base};"
            " set data.download: true, or copy the files there"
        )
    return base


def read_test(name: str, root: str | None = None, download: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """A registered dataset's official test set (images, labels), read now and not kept: by its `load_test`
    alone where it has one (the training pool is not read), else from the whole dataset (`read_pool`)."""
    info = DATASETS.get_entry(name)
    if info.load_test is None:
        pool = read_pool(name, root, download)
        return pool.test_x, pool.test_y
    return info.load_test(_base(name, root, download), download)


def test_images(
    name: str, test_size: int, root: str | None = None, download: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """The first `test_size` images of a dataset's official test set (what every split's test part is)."""
    pool = load_pool(name, root, download)
    return unit_pixels(pool.test_x[:test_size]), pool.test_y[:test_size]


def split_indices(n: int, train_size: int | None, val_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The training and validation images' positions in a training pool of `n`: one fixed permutation of it, val
    first (`train_size=None`: every image not in val)."""
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(SPLIT_SEED))
    val_idx = perm[:val_size]
    return (perm[val_size:] if train_size is None else perm[val_size : val_size + train_size]), val_idx


def _check_sizes(name: str, n: int, train_size: int | None, val_size: int) -> None:
    if val_size + (train_size or 0) > n:
        raise ValueError(
            f"data: train_size + val_size = {val_size + (train_size or 0)} exceeds the {n} training images of {name!r}"
        )


def _cut(name: str, pool: Pool, train: tuple, val: tuple, test_size: int | None, n: int) -> Splits:
    """The split of a dataset of `n` training images: its training and validation images and labels as given
    (`train`, `val`), the first `test_size` images of `pool`'s test set (all: None)."""
    n_test = len(pool.test_y) if test_size is None else min(test_size, len(pool.test_y))
    ident = json.dumps([name, SPLIT_SEED, len(train[1]), len(val[1]), n_test, n], separators=(",", ":"))
    return Splits(
        train_x=stored(train[0]),
        train_y=train[1],
        val_x=stored(val[0]),
        val_y=val[1],
        test_x=unit_pixels(pool.test_x[:n_test]),
        test_y=pool.test_y[:n_test],
        num_classes=pool.num_classes,
        mean=pool.mean,
        std=pool.std,
        split_id=hashlib.sha256(ident.encode()).hexdigest()[:12],
    )


def make_splits(
    name: str,
    train_size: int | None,
    val_size: int,
    test_size: int | None,
    *,
    root: str | None = None,
    download: bool = True,
    pool: Pool | None = None,
) -> Splits:
    """Split a dataset deterministically: val and train come from one fixed permutation of the training pool.

    `train_size=None` takes every pool image not in val; `test_size=None` the whole official test set (its
    first `test_size` images otherwise). `pool`: the dataset already read (default: `load_pool`'s copy).
    """
    pool = load_pool(name, root, download) if pool is None else pool
    n = len(pool.train_y)
    _check_sizes(name, n, train_size, val_size)
    train_idx, val_idx = split_indices(n, train_size, val_size)
    train, val = (pool.train_x[train_idx], pool.train_y[train_idx]), (pool.train_x[val_idx], pool.train_y[val_idx])
    return _cut(name, pool, train, val, test_size, n)


def read_split(
    name: str, train_size: int | None, val_size: int, test_size: int | None, root: str | None = None,
    download: bool = True,
) -> Splits:  # fmt: skip
    """`make_splits`'s split, read now and not kept: where the dataset has a reader of chosen training images
    (`DatasetInfo.load_rows`: MNIST, Fashion-MNIST, CIFAR-10, SVHN) only the split's training and validation
    images are kept of its training files, read file by file (a split of 1,000 CIFAR-10 images holds those, not
    the 50,000); the same images and labels, bit for bit. A dataset without one, or whose files hold another
    number of training images than it is registered with, is read whole (`read_pool`) and split."""
    info = DATASETS.get_entry(name)
    if info.load_rows is not None:
        _check_sizes(name, info.train_pool, train_size, val_size)
        train_idx, val_idx = split_indices(info.train_pool, train_size, val_size)
        pool, n = info.load_rows(_base(name, root, download), download, torch.cat([train_idx, val_idx]))
        if n == info.train_pool:  # the positions were drawn for a pool of this size
            k = len(train_idx)
            train, val = (pool.train_x[:k], pool.train_y[:k]), (pool.train_x[k:], pool.train_y[k:])
            return _cut(name, pool, train, val, test_size, n)
    return make_splits(name, train_size, val_size, test_size, pool=read_pool(name, root, download))


def read_first(name: str, n: int, root: str | None = None, download: bool = True) -> torch.Tensor:
    """The first `n` training images of a registered dataset (all of them where it has fewer), read now and not
    kept with the rest: by its `load_rows` where it has one, else cut from the whole dataset read."""
    info = DATASETS.get_entry(name)
    if info.load_rows is not None:
        pool, total = info.load_rows(_base(name, root, download), download, torch.arange(min(n, info.train_pool)))
        if total == info.train_pool:
            return pool.train_x
    return read_pool(name, root, download).train_x[:n]


def rows_of(parts, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The images and labels at `index` (positions in the concatenation of `parts`, an iterable of (images,
    labels) read one after the other, e.g. a dataset's training files), each part let go once its rows are
    taken; and how many images the parts held in all. A position past the end is left unset: the caller
    compares the count with the size it drew the positions for."""
    x_out = y_out = None
    offset = 0
    for x, y in parts:
        if x_out is None:
            x_out = torch.empty((len(index), *x.shape[1:]), dtype=x.dtype)
            y_out = torch.empty(len(index), dtype=y.dtype)
        where = ((index >= offset) & (index < offset + len(y))).nonzero().squeeze(1)
        x_out[where], y_out[where] = x[index[where] - offset], y[index[where] - offset]
        offset += len(y)
    if x_out is None:
        raise ValueError("a dataset with no training images")
    return x_out, y_out, offset


def fingerprint(splits: Splits) -> str:
    """A cheap content fingerprint of a split (its id, shapes, every label and a stride of its pixels): two
    data roots that hold different images under one dataset name never share cached activations."""
    h = hashlib.sha256(splits.split_id.encode())
    for part in ("train", "val", "test"):
        x, y = getattr(splits, f"{part}_x"), getattr(splits, f"{part}_y")
        h.update(repr((tuple(x.shape), str(x.dtype))).encode())
        h.update(y.cpu().numpy().tobytes())
        if is_stream(x):  # the files' names and sizes: reading every pixel of ImageNet is not cheap
            h.update(x.source.fingerprint(x.index).encode())
            continue
        flat = x.reshape(-1)
        h.update(flat[:: max(1, len(flat) // 4096)].cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def batches(x: torch.Tensor, y: torch.Tensor, batch_size: int, generator: torch.Generator | None = None):
    """Yield (x, y) mini-batches; shuffled when a generator is given. The order is drawn on the CPU (the same on
    every device) and moved to the data's device once per epoch, not once per batch: indexing a GPU tensor with a
    CPU index copies the index first and waits for the device. Streamed images (`sweep.data.stream`) are decoded
    by the loader's workers, in that order."""
    order = torch.randperm(len(y), generator=generator) if generator is not None else None
    yield from zip(chunks(x, batch_size, order), chunks(y, batch_size, order))
