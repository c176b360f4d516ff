"""Donor-training augmentations: shapes, ranges, and what each one may and may not change."""

import copy

import pytest
import torch

from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.data.augment import AUGMENTATIONS, augment, random_affine, random_crop, random_flip
from tests.conftest import TINY_SPACE


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("name", sorted(AUGMENTATIONS))
def test_every_augmentation_keeps_shape_and_pixel_range(name):
    x = torch.rand(16, 3, 28, 28)
    y = AUGMENTATIONS[name](x, _gen())
    assert y.shape == x.shape and 0.0 <= float(y.min()) and float(y.max()) <= 1.0
    assert not torch.equal(y, x), "a random augmentation of 16 images changes something"
    assert torch.equal(AUGMENTATIONS[name](x, _gen()), y), "seeded: reproducible"


def test_crop_is_a_shift_of_the_padded_image():
    x = torch.rand(32, 1, 8, 8)
    y = random_crop(x, _gen(), pad=4)
    for i in range(32):  # every output is some 8x8 window of the zero-padded input
        padded = torch.nn.functional.pad(x[i], (4, 4, 4, 4))
        assert any(torch.equal(padded[:, a : a + 8, b : b + 8], y[i]) for a in range(9) for b in range(9))


def test_crop_takes_each_image_at_its_own_drawn_offset():
    """The one-gather crop against the per-image slices it replaced, with the same two draws of offsets."""
    x = torch.rand(16, 3, 10, 12)
    y = random_crop(x, _gen(7), pad=4)
    gen = _gen(7)
    dy = torch.randint(0, 9, (16,), generator=gen).tolist()
    dx = torch.randint(0, 9, (16,), generator=gen).tolist()
    padded = torch.nn.functional.pad(x, (4, 4, 4, 4))
    assert len(set(zip(dy, dx))) > 8  # the offsets differ between images
    for i in range(16):  # a copy of pixels: exact
        assert torch.equal(y[i], padded[i, :, dy[i] : dy[i] + 10, dx[i] : dx[i] + 12])


def test_flip_flips_some_images_and_leaves_the_rest():
    x = torch.rand(64, 1, 4, 4)
    y = random_flip(x, _gen())
    flipped = [torch.equal(y[i], x[i].flip(-1)) for i in range(64)]
    kept = [torch.equal(y[i], x[i]) for i in range(64)]
    assert all(f or k for f, k in zip(flipped, kept)) and 10 < sum(flipped) < 54


def test_affine_moves_little_mass():
    x = torch.zeros(8, 1, 28, 28)
    x[:, :, 10:18, 10:18] = 1.0
    y = random_affine(x, _gen())
    ratio = y.sum((1, 2, 3)) / x.sum((1, 2, 3))
    assert ((ratio > 0.75) & (ratio < 1.3)).all()  # area scales by s^2 with s in [0.9, 1.1]


def test_augment_is_part_of_the_donor_identity_and_validated():
    space = copy.deepcopy(TINY_SPACE)
    plain = parse_space(space).donors["plain_a"].donor_key
    space["donors"]["plain_a"]["augment"] = ["crop", "flip"]
    donor = parse_space(space).donors["plain_a"]
    assert donor.augment == ("crop", "flip") and donor.donor_key != plain
    space["donors"]["plain_a"]["augment"] = ["crop", "rotate"]
    with pytest.raises(SpecError, match=r"^donors.plain_a.augment\[1\]: expected one of"):
        parse_space(space)
    assert augment(torch.rand(2, 1, 28, 28), (), _gen()).shape == (2, 1, 28, 28)


@pytest.mark.slow
def test_a_donor_trains_with_augmentation():
    from sweep.data.core import make_splits
    from sweep.train.donors import train_donor

    space = copy.deepcopy(TINY_SPACE)
    space["donors"]["plain_a"].update(augment=["affine"], epochs=1)
    donor = parse_space(space).donors["plain_a"]
    splits = make_splits("digits", 400, 100, 100)
    epochs = []
    model = train_donor(donor, splits, torch.device("cpu"), progress=epochs.append)
    assert len(epochs) == 1 and torch.isfinite(torch.tensor(epochs[0]["train_loss"]))
    assert not model.training
