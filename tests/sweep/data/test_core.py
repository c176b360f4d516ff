"""Datasets: the IDX reader, deterministic and disjoint splits, the resized digits."""

import dataclasses
import gzip

import numpy as np
import pytest
import torch

from sweep.data import core as data


def _write_idx(path, array: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    with gzip.open(path, "wb") as fh:
        fh.write(header + array.astype(np.uint8).tobytes())


def test_mnist_format_loader_reads_its_own_files(tmp_path):
    rng = np.random.default_rng(0)
    train = rng.integers(0, 256, (7, 28, 28))
    test = rng.integers(0, 256, (3, 28, 28))
    _write_idx(tmp_path / "train-images-idx3-ubyte.gz", train)
    _write_idx(tmp_path / "train-labels-idx1-ubyte.gz", np.arange(7) % 10)
    _write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", test)
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.array([1, 2, 3]))
    pool = data.load_mnist_like(tmp_path, mean=0.3, std=0.3)
    assert pool.train_x.shape == (7, 1, 28, 28) and pool.test_x.shape == (3, 1, 28, 28)
    assert pool.train_x.dtype == torch.uint8  # as the file stores them: a quarter of float32's memory
    assert torch.equal(pool.train_x[2, 0], torch.from_numpy(train[2].astype(np.uint8)))
    assert pool.test_y.tolist() == [1, 2, 3]


def test_a_split_cut_from_8_bit_pixels_is_the_same_part_of_the_dataset_as_floats(tmp_path):
    """What a unit reads is [0, 1] floats, bit for bit those of converting the whole dataset first (the order the
    loaders converted in before they kept 8-bit pixels), whatever part of it is cut."""
    rng = np.random.default_rng(1)
    stored = data.Pool(
        torch.from_numpy(rng.integers(0, 256, (40, 1, 6, 6)).astype(np.uint8)),
        torch.arange(40) % 10,
        torch.from_numpy(rng.integers(0, 256, (9, 1, 6, 6)).astype(np.uint8)),
        torch.arange(9) % 10,
        10,
        (0.5,),
        (0.5,),
    )
    floats = dataclasses.replace(stored, train_x=stored.train_x.float() / 255, test_x=stored.test_x.float() / 255)
    a = data.make_splits("digits", 25, 10, 5, pool=stored)
    b = data.make_splits("digits", 25, 10, 5, pool=floats)
    # training and validation images stay 8-bit (a quarter of the memory), read as floats batch by batch
    assert a.train_x.source.data.dtype == torch.uint8 and a.val_x.source.data.dtype == torch.uint8
    assert a.test_x.dtype == torch.float32 and not data.is_stream(a.test_x)
    for part in ("train_x", "val_x", "test_x"):
        assert torch.equal(getattr(a, part).float(), getattr(b, part)), part
    order = torch.randperm(25, generator=torch.Generator().manual_seed(3))
    got, want = list(data.chunks(a.train_x, 7, order)), list(data.chunks(b.train_x, 7, order))
    assert [len(g) for g in got] == [7, 7, 7, 4] and all(torch.equal(g, w) for g, w in zip(got, want))
    assert torch.equal(a.train_x[4], b.train_x[4]) and torch.equal(a.train_x[3:9].float(), b.train_x[3:9])
    assert a.in_channels == 1 and a.image_size == 6
    assert data.unit_pixels(b.test_x) is b.test_x  # floats pass as they are


def test_truncated_idx_file_is_an_error(tmp_path):
    path = tmp_path / "x.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(bytes([0, 0, 8, 1]) + (10).to_bytes(4, "big") + b"\x00" * 4)
    with pytest.raises(ValueError, match="header says"):
        data._read_idx(path)


def test_digits_are_28x28_in_unit_range():
    pool = data.load_pool("digits")
    assert pool.train_x.shape[1:] == (1, 28, 28)
    assert 0.0 <= float(pool.train_x.min()) and float(pool.train_x.max()) <= 1.0
    assert len(pool.train_y) + len(pool.test_y) == 1797


def test_splits_are_deterministic_disjoint_and_recorded():
    a = data.make_splits("digits", train_size=500, val_size=200, test_size=100)
    b = data.make_splits("digits", train_size=500, val_size=200, test_size=100)
    assert a.split_id == b.split_id and torch.equal(a.train_x, b.train_x)
    assert (len(a.train_y), len(a.val_y), len(a.test_y)) == (500, 200, 100)
    flat_train = {tuple(r.tolist()) for r in a.train_x.flatten(1)[:, ::7]}
    assert not any(tuple(r.tolist()) in flat_train for r in a.val_x.flatten(1)[:, ::7])
    c = data.make_splits("digits", train_size=400, val_size=200, test_size=100)
    assert c.split_id != a.split_id


def test_oversized_split_is_refused():
    with pytest.raises(ValueError, match="exceeds"):
        data.make_splits("digits", train_size=5000, val_size=200, test_size=None)


@pytest.mark.skipif(
    data.find_idx_dir([data.data_root() / "fashion-mnist", data.Path("/usr/share/datasets/fashion-mnist")]) is None,
    reason="Fashion-MNIST files not installed (make installs dataset-fashion-mnist)",
)
def test_fashion_mnist_has_all_70000_images():
    pool = data.load_pool("fashion_mnist")
    assert len(pool.train_y) == 60000 and len(pool.test_y) == 10000
    assert pool.train_x.shape[1:] == (1, 28, 28)
