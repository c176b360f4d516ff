"""Smith & Marcu 2024's colour-digit datasets, built from tiny MNIST files written in MNIST's own IDX format:
each variant's promised colour/label relation, balance, determinism."""

import numpy as np
import pytest
import torch

from sweep.data import core as data
from sweep.data.colour_digits import COLOUR_MAP, COLOUR_NOISE

N_TRAIN, N_TEST = 400, 100


def _idx(path, array):
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A tiny MNIST: strokes (value 200) on a black background, balanced labels."""
    rng = np.random.default_rng(0)
    raw = tmp_path_factory.mktemp("data") / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for stem, n in (("train", N_TRAIN), ("t10k", N_TEST)):
        images = np.where(rng.random((n, 28, 28)) < 0.2, 200, 0)
        _idx(raw / f"{stem}-images-idx3-ubyte", images)
        _idx(raw / f"{stem}-labels-idx1-ubyte", np.arange(n) % 10)
    return str(raw.parent.parent)


def _pool(name, root):
    data.load_pool.cache_clear()
    return data.load_pool(name, root, download=False)


def _nearest_colour(images: torch.Tensor) -> torch.Tensor:
    """The COLOUR_MAP index closest to each image's background (its non-white pixels)."""
    background = torch.where(images.amin(1, keepdim=True) < 1.0, images, torch.nan).nanmean(dim=(2, 3))
    colours = torch.tensor(COLOUR_MAP, dtype=torch.float32) / 255
    return torch.cdist(background, colours).argmin(1)


def test_correlated_background_is_the_labels_colour_within_ten_percent(root):
    pool = _pool("mnist_correlated", root)
    assert pool.train_x.shape == (N_TRAIN, 3, 28, 28) and pool.test_x.shape == (N_TEST, 3, 28, 28)
    for x, y in ((pool.train_x, pool.train_y), (pool.test_x, pool.test_y)):
        assert torch.equal(_nearest_colour(x), y)  # the test set gets the same procedure
        flat = torch.where(x.amin(1, keepdim=True) < 1.0, x, torch.nan)
        per_image = flat.nanmean(dim=(2, 3))
        target = torch.tensor(COLOUR_MAP, dtype=torch.float32)[y] / 255
        assert (per_image - target).abs().max() <= COLOUR_NOISE + 1e-6  # one flat colour, moved by <= 10%
        assert (per_image - target).abs().max() > 0.02  # ... and moved
    mnist = _pool("mnist", root)
    strokes = (mnist.train_x > 0).expand(-1, 3, -1, -1)
    assert torch.equal(pool.train_x[strokes], torch.ones(int(strokes.sum())))  # non-zero pixels snap to white


def test_digit_and_colour_decouple_colour_from_the_label_in_opposite_ways(root):
    mnist = _pool("mnist", root)
    digit, colour = _pool("mnist_digit", root), _pool("mnist_colour", root)
    assert torch.equal(digit.train_y, mnist.train_y)  # Digit: the digit is the label ...
    assert (_nearest_colour(digit.train_x) == digit.train_y).float().mean() < 0.3  # ... the colour is not
    assert torch.equal(_nearest_colour(colour.train_x), colour.train_y)  # Colour: the colour is the label ...
    assert (colour.train_y == mnist.train_y).float().mean() < 0.3  # ... the digit is not
    counts = torch.bincount(colour.train_y, minlength=10)
    assert counts.min() > N_TRAIN / 10 * 0.4  # every colour class present, roughly balanced


def test_colour_only_has_no_digit_and_rgb_keeps_the_grey_values(root):
    only = _pool("mnist_colour_only", root)
    assert (only.train_x.flatten(2).std(2) == 0).all()  # one flat colour per image
    assert torch.equal(_nearest_colour(only.train_x), only.train_y)
    mnist = _pool("mnist", root)
    rgb = _pool("mnist_rgb", root)
    assert torch.equal(rgb.train_x, mnist.train_x.expand(-1, 3, -1, -1)) and torch.equal(rgb.train_y, mnist.train_y)


def test_variants_are_deterministic_and_registered_for_every_base(root):
    first = _pool("mnist_digit", root)
    again = _pool("mnist_digit", root)
    assert torch.equal(first.train_x, again.train_x) and torch.equal(first.test_x, again.test_x)
    assert not torch.equal(first.train_x[:N_TEST], first.test_x)  # train and test draw differently
    for base in ("mnist", "fashion_mnist"):
        for variant in ("correlated", "digit", "colour", "colour_only", "rgb"):
            info = data.DATASETS[f"{base}_{variant}"]
            assert info.channels == 3 and info.image_size == 28
            assert info.train_pool == data.DATASETS[base].train_pool
