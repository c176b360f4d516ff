"""What a worker keeps of a dataset (`sweep.worker.splits`): with the worker's cache on, the split, the test images
and an auxiliary set's images it built, each a tensor of its own, equal to what the data layer builds, and not the
dataset they came from; with the cache off, the dataset (`load_pool`'s copy) instead, and nothing built."""

import pytest
import torch

from sweep.data.core import fingerprint, load_pool, make_splits
from sweep.worker import cache
from sweep.worker.splits import worker_splits, worker_test_images, worker_train_images


@pytest.fixture
def configured(tmp_path):
    def set_(**env):
        load_pool.cache_clear()
        return cache.configure({cache.DIR_ENV: str(tmp_path / "node"), **env})

    yield set_
    cache.configure()
    load_pool.cache_clear()


def _alone(x: torch.Tensor) -> bool:
    """Whether `x` holds its own storage (no view of a larger tensor keeping it alive)."""
    return x.untyped_storage().nbytes() == x.numel() * x.element_size()


@pytest.mark.parametrize("dataset", ["digits", pytest.param("fashion_mnist_correlated", marks=pytest.mark.slow)])
def test_with_the_cache_on_a_worker_keeps_what_it_built_and_not_the_dataset(configured, dataset):
    configured()
    splits = worker_splits(dataset, 300, 100, 50, torch.device("cpu"))
    x, y = worker_test_images(dataset, 40)
    outliers = worker_train_images(dataset, 30)
    assert load_pool.cache_info().currsize == 0  # no dataset held by the process
    for t in (splits.train_x, splits.val_x, splits.test_x, splits.test_y, x, y, outliers):
        assert _alone(t)
    load_pool.cache_clear()
    reference = make_splits(dataset, 300, 100, 50)  # the data layer's, from its per-process copy
    for part in ("train_x", "train_y", "val_x", "val_y", "test_x", "test_y"):
        assert torch.equal(getattr(splits, part), getattr(reference, part)), part
    pool = load_pool(dataset)
    assert torch.equal(x, pool.test_x[:40]) and torch.equal(y, pool.test_y[:40])
    assert torch.equal(outliers, pool.train_x[:30])
    assert splits is worker_splits(dataset, 300, 100, 50, torch.device("cpu"))  # kept: built once per worker


def test_with_the_cache_off_the_dataset_is_read_once_per_process(configured):
    configured(STITCHSWEEP_CACHE="off")
    a = worker_splits("digits", 300, 100, 50, torch.device("cpu"))
    b = worker_splits("digits", 200, 100, 50, torch.device("cpu"))
    assert load_pool.cache_info().currsize == 1 and load_pool.cache_info().misses == 1
    assert torch.equal(a.val_x, b.val_x)


def test_a_unit_that_reads_test_images_only_reads_the_test_set_alone(configured, registered):
    """A dataset with a reader of its test set alone (`DatasetInfo.load_test`): the training pool is never read."""
    from sweep.data.declared import DatasetInfo
    from sweep.registry import DATASETS

    test_x, test_y = torch.randint(0, 256, (6, 1, 28, 28), dtype=torch.uint8), torch.arange(6)

    def whole(root, download):
        raise AssertionError("the whole dataset was read")

    registered(DATASETS, "test_alone", DatasetInfo(whole, 10, 6, 1, 28, load_test=lambda root, d: (test_x, test_y)))
    configured()
    x, y = worker_test_images("test_alone", 4)
    assert x.dtype == torch.float32 and torch.equal(x, test_x[:4].to(torch.float32) / 255)
    assert torch.equal(y, test_y[:4]) and _alone(x) and _alone(y)


def test_a_worker_keeps_only_its_splits_images_of_a_dataset_read_by_parts(configured, registered):
    """A dataset with a reader of chosen training images (`DatasetInfo.load_rows`): the worker's split and its
    outliers are read through it (the whole dataset never is) and equal those cut from the whole pool."""
    from sweep.data.core import Pool
    from sweep.data.declared import DatasetInfo
    from sweep.registry import DATASETS

    g = torch.Generator().manual_seed(0)
    pool = Pool(
        torch.randint(0, 256, (40, 1, 28, 28), dtype=torch.uint8, generator=g), torch.arange(40) % 10,
        torch.randint(0, 256, (8, 1, 28, 28), dtype=torch.uint8, generator=g), torch.arange(8) % 10,
        10, (0.5,), (0.25,),
    )  # fmt: skip
    asked = []

    def whole(root, download):
        raise AssertionError("the whole dataset was read")

    def rows(root, download, index):
        asked.append(len(index))
        part = Pool(pool.train_x[index], pool.train_y[index], pool.test_x, pool.test_y, 10, (0.5,), (0.25,))
        return part, 40

    registered(DATASETS, "by_parts", DatasetInfo(whole, 40, 8, 1, 28, load_rows=rows))
    configured()
    splits = worker_splits("by_parts", 12, 5, 6, torch.device("cpu"))
    reference = make_splits("by_parts", 12, 5, 6, pool=pool)
    assert asked == [17]  # the split's 12 + 5 training images, not the 40
    for part in ("train_x", "val_x"):
        assert torch.equal(getattr(splits, part).source.data, getattr(reference, part).source.data)
    assert torch.equal(splits.test_x, reference.test_x) and _alone(splits.test_x)
    assert splits.split_id == reference.split_id and splits.fingerprint == fingerprint(reference)
    outliers = worker_train_images("by_parts", 3)
    assert asked[-1] == 3 and torch.equal(outliers, pool.train_x[:3].float() / 255) and _alone(outliers)
    everything = worker_train_images("by_parts", 100)  # more than the pool holds: all of it, as a cut of the pool
    assert asked[-1] == 40 and torch.equal(everything, pool.train_x.float() / 255)


@pytest.mark.parametrize("cache_on", [True, False])
def test_outliers_asked_beyond_a_pool_are_the_whole_pool(configured, cache_on):
    """OOD outliers of more images than an auxiliary dataset's training pool holds (the digits' 1,438) are all of
    them, with the cache on (read and let go) as off (`load_pool`'s copy)."""
    configured(**({} if cache_on else {"STITCHSWEEP_CACHE": "off"}))
    outliers = worker_train_images("digits", 5000)
    assert torch.equal(outliers, load_pool("digits").train_x) and len(outliers) == 1438
