"""The torchvision datasets load from tiny files written in each dataset's own on-disk format, offline."""

import copy
import gzip
import pickle

import numpy as np
import pytest
import scipy.io
import torch
import torchvision.datasets
import torchvision.datasets.cifar

from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.data import core as data
from tests.conftest import TINY_SPACE

RNG = np.random.default_rng(0)


@pytest.fixture
def trust_tiny_files(monkeypatch):
    """torchvision checks CIFAR-10 and SVHN files against the md5 sums of the real ones; tiny stand-ins
    cannot match, so that one check is switched off here (it still guards real files)."""
    monkeypatch.setattr(torchvision.datasets.CIFAR10, "_check_integrity", lambda self: True)
    monkeypatch.setattr(torchvision.datasets.cifar, "check_integrity", lambda path, md5=None: True)
    monkeypatch.setattr(torchvision.datasets.SVHN, "_check_integrity", lambda self: True)


def _idx(path, array, gz=False):
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    opener = gzip.open if gz else open
    with opener(path, "wb") as fh:
        fh.write(header + array.astype(np.uint8).tobytes())


def _write_mnist(raw, gz=False):
    raw.mkdir(parents=True)
    suffix = ".gz" if gz else ""
    _idx(raw / f"train-images-idx3-ubyte{suffix}", RNG.integers(0, 256, (12, 28, 28)), gz)
    _idx(raw / f"train-labels-idx1-ubyte{suffix}", np.arange(12) % 10, gz)
    _idx(raw / f"t10k-images-idx3-ubyte{suffix}", RNG.integers(0, 256, (4, 28, 28)), gz)
    _idx(raw / f"t10k-labels-idx1-ubyte{suffix}", np.array([3, 1, 4, 1]), gz)


def test_cifar10_from_its_python_pickles(tmp_path, trust_tiny_files):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    written = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        written[name] = {"data": RNG.integers(0, 256, (3, 3072), dtype=np.uint8), "labels": [0, 5, 9]}
        (folder / name).write_bytes(pickle.dumps(written[name]))
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": [str(i) for i in range(10)]}))
    pool = data.load_pool("cifar10", str(tmp_path), download=False)
    assert pool.train_x.shape == (15, 3, 32, 32) and pool.test_x.shape == (3, 3, 32, 32)
    # kept as stored (8-bit), channels first: a row of the pickle is the red plane, then green, then blue
    assert pool.train_x.dtype == torch.uint8
    assert torch.equal(pool.test_x[1], torch.from_numpy(written["test_batch"]["data"][1].reshape(3, 32, 32)))
    assert pool.test_y.tolist() == [0, 5, 9]
    splits = data.make_splits("cifar10", None, 5, None, root=str(tmp_path), download=False)
    assert (len(splits.train_y), len(splits.val_y), splits.image_size) == (10, 5, 32)
    assert splits.test_x.dtype == torch.float32 and 0.0 <= splits.test_x.min() and splits.test_x.max() <= 1.0


def test_svhn_from_its_matlab_files(tmp_path, trust_tiny_files):
    for split, n in (("train", 6), ("test", 2)):
        labels = np.array([[10], [1], [2], [3], [4], [5]][:n], dtype=np.uint8)  # SVHN writes 0 as 10
        scipy.io.savemat(
            tmp_path / f"{split}_32x32.mat", {"X": RNG.integers(0, 256, (32, 32, 3, n), dtype=np.uint8), "y": labels}
        )
    pool = data.load_pool("svhn", str(tmp_path), download=False)
    assert pool.train_x.shape == (6, 3, 32, 32)
    assert pool.train_y.tolist() == [0, 1, 2, 3, 4, 5]


def test_mnist_from_its_raw_idx_files(tmp_path):
    _write_mnist(tmp_path / "MNIST" / "raw")
    pool = data.load_pool("mnist", str(tmp_path), download=False)
    assert pool.train_x.shape == (12, 1, 28, 28) and pool.test_y.tolist() == [3, 1, 4, 1]


def test_fashion_mnist_from_a_root_in_torchvision_layout(tmp_path):
    _write_mnist(tmp_path / "FashionMNIST" / "raw", gz=True)
    pool = data.load_pool("fashion_mnist", str(tmp_path), download=False)
    assert len(pool.train_y) == 12


def test_missing_files_with_download_off_fail_before_anything_runs(tmp_path):
    space = copy.deepcopy(TINY_SPACE)
    space["data"] = {"dataset": "cifar10", "root": str(tmp_path), "download": False, "val_size": 100}
    space["donors"]["plain_a"]["arch"] = "resnet18"
    with pytest.raises(SpecError) as err:
        parse_space(space)
    msg = str(err.value)
    assert msg.startswith("data.root: expected the cifar10 files") and "data_batch_1" in msg
    assert "download: true" in msg


def test_missing_files_at_load_time_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="MNIST/raw/train-images-idx3-ubyte"):
        data.load_pool("mnist", str(tmp_path), download=False)


def test_data_location_is_not_part_of_trial_identity(tmp_path):
    space = copy.deepcopy(TINY_SPACE)
    a = {t.trial_id for t in parse_space(space).trials}
    space["data"]["root"] = str(tmp_path)
    space["data"]["download"] = False
    assert {t.trial_id for t in parse_space(space).trials} == a


def test_registry_sizes_describe_the_real_datasets():
    assert (data.DATASETS["cifar10"].train_pool, data.DATASETS["cifar10"].test) == (50000, 10000)
    assert (data.DATASETS["svhn"].train_pool, data.DATASETS["svhn"].test) == (73257, 26032)
    assert data.DATASETS["mnist"].channels == 1 and data.DATASETS["cifar10"].channels == 3


def _cifar_files(root):
    folder = root / "cifar-10-batches-py"
    folder.mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {"data": RNG.integers(0, 256, (3, 3072), dtype=np.uint8), "labels": [0, 5, 9]}
        (folder / name).write_bytes(pickle.dumps(batch))
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": [str(i) for i in range(10)]}))
    return [folder / f"data_batch_{i}" for i in range(1, 6)]


def _svhn_files(root):
    for split, n in (("train", 6), ("test", 2)):
        x = RNG.integers(0, 256, (32, 32, 3, n), dtype=np.uint8)
        scipy.io.savemat(root / f"{split}_32x32.mat", {"X": x, "y": np.arange(1, n + 1, dtype=np.uint8)[:, None]})
    return [root / "train_32x32.mat"]


def _mnist_files(root):
    _write_mnist(root / "MNIST" / "raw")
    return [root / "MNIST" / "raw" / f"train-{part}-idx{n}-ubyte" for part, n in (("images", 3), ("labels", 1))]


def _fashion_files(root):
    _write_mnist(root / "FashionMNIST" / "raw", gz=True)
    raw = root / "FashionMNIST" / "raw"
    return [raw / f"train-{part}-idx{n}-ubyte.gz" for part, n in (("images", 3), ("labels", 1))]


@pytest.mark.parametrize(
    "name, write",
    [("cifar10", _cifar_files), ("svhn", _svhn_files), ("mnist", _mnist_files), ("fashion_mnist", _fashion_files)],
)
def test_a_test_set_is_read_alone_and_is_the_datasets_test_set(tmp_path, trust_tiny_files, name, write):
    training_files = write(tmp_path)
    pool = data.read_pool(name, str(tmp_path), download=False)
    x, y = data.read_test(name, str(tmp_path), download=False)
    assert x.dtype == torch.uint8 and torch.equal(x, pool.test_x) and torch.equal(y, pool.test_y)
    for path in training_files:  # garbled: a read of the whole dataset now fails, the test set's does not
        path.write_bytes(b"not the training images")
    with pytest.raises(Exception):  # noqa: B017  (each format's own error)
        data.read_pool(name, str(tmp_path), download=False)
    x2, y2 = data.read_test(name, str(tmp_path), download=False)
    assert torch.equal(x2, x) and torch.equal(y2, y)


WRITERS = [("cifar10", _cifar_files, 15), ("svhn", _svhn_files, 6), ("mnist", _mnist_files, 12)]
WRITERS.append(("fashion_mnist", _fashion_files, 12))


def _pixels(x):
    """A split part's 8-bit pixels (`stored` wraps them) or its floats."""
    return x.source.data if hasattr(x, "source") else x


@pytest.mark.parametrize("name, write, n", WRITERS)
def test_a_split_read_alone_is_the_split_of_the_whole_dataset(tmp_path, trust_tiny_files, registered, name, write, n):
    """`read_split` keeps only the split's training images of the files (`DatasetInfo.load_rows`): the same
    images, labels, test part, id and fingerprint as `make_splits` on the whole dataset, bit for bit."""
    import dataclasses

    from sweep.registry import DATASETS

    write(tmp_path)
    # the loaders of `name`, registered with the tiny files' size (the positions are drawn for a pool of it)
    registered(DATASETS, f"{name}_tiny", dataclasses.replace(DATASETS.get_entry(name), train_pool=n))
    for sizes in ((None, 2, None), (3, 2, 1), (n - 2, 1, 2)):
        whole = data.make_splits(f"{name}_tiny", *sizes, pool=data.read_pool(name, str(tmp_path), download=False))
        alone = data.read_split(f"{name}_tiny", *sizes, root=str(tmp_path), download=False)
        for part in ("train_x", "val_x", "test_x", "train_y", "val_y", "test_y"):
            a, b = _pixels(getattr(alone, part)), _pixels(getattr(whole, part))
            assert a.dtype == b.dtype and torch.equal(a, b), (sizes, part)
        assert alone.split_id == whole.split_id and data.fingerprint(alone) == data.fingerprint(whole)
        assert (alone.num_classes, alone.mean, alone.std) == (whole.num_classes, whole.mean, whole.std)
        kept = _pixels(alone.train_x).untyped_storage().nbytes()  # the split's rows, not the training files'
        assert kept == (len(alone.train_y) + len(alone.val_y)) * _pixels(alone.train_x)[0].numel()
    train_x = data.read_pool(name, str(tmp_path), download=False).train_x
    for k in (3, n, n + 5):  # the first k training images, all of them where there are fewer
        assert torch.equal(data.read_first(f"{name}_tiny", k, str(tmp_path), download=False), train_x[:k])


@pytest.mark.parametrize("name, write, n", WRITERS)
def test_files_of_another_size_than_registered_are_split_whole(tmp_path, trust_tiny_files, name, write, n):
    """The positions of a split are drawn for the registered size: files that hold another number of training
    images (here fewer than the real dataset's) are read whole and split as `make_splits` splits them."""
    write(tmp_path)
    whole = data.make_splits(name, None, 2, None, pool=data.read_pool(name, str(tmp_path), download=False))
    alone = data.read_split(name, None, 2, None, root=str(tmp_path), download=False)
    assert len(alone.train_y) == n - 2 and alone.split_id == whole.split_id
    assert torch.equal(_pixels(alone.train_x), _pixels(whole.train_x))
