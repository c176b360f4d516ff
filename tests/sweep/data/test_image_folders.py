"""ImageNette and ImageWoof (Cianfarani et al. 2022's ImageNet subsets) load from a tiny folder of generated
images written in their image-folder layout, offline."""

import numpy as np
import pytest
from PIL import Image

from sweep.data import core as data
from sweep.data.image_folders import SIZE, read_image_folder
from sweep.data.stream import Images


def _write(root, folder, per_class):
    classes = [f"n0{i:07d}" for i in range(10)]
    for split, n in per_class.items():
        for c, name in enumerate(classes):
            d = root / folder / split / name
            d.mkdir(parents=True)
            for k in range(n):
                # wide images: black 40-pixel bands left and right, the middle a grey that encodes the class
                img = np.zeros((200, 320, 3), dtype=np.uint8)
                img[:, 40:280] = 20 * c + k
                Image.fromarray(img).save(d / f"{name}_{k}.JPEG" if k % 2 == 0 else d / f"{name}_{k}.png")
    return classes


@pytest.mark.parametrize("name,folder", [("imagenette", "imagenette2-160"), ("imagewoof", "imagewoof2-160")])
def test_an_imagenet_subset_loads_from_its_image_folders(tmp_path, name, folder):
    _write(tmp_path, folder, {"train": 2, "val": 2})
    pool = data.load_pool(name, str(tmp_path), download=False)
    assert pool.train_x.shape == (20, 3, SIZE, SIZE) and pool.test_x.shape == (20, 3, SIZE, SIZE)
    assert pool.num_classes == 10 and pool.train_y.tolist() == [c for c in range(10) for _ in range(2)]
    # shorter side to 160 (320 x 200 -> 256 x 160), centre crop of 160 from 48 px in: the black bands (32 px
    # after scaling) are cut away, with margin for the resampling filter
    first = pool.train_x[0].numpy()
    assert abs(first.min() - first.max()) < 2 / 255 and abs(first.mean() - 0.0) < 2 / 255  # class 0, k 0: black
    grey = pool.train_x[2 * 5].numpy()  # class 5, image 0: 100 / 255 everywhere, JPEG within a few levels
    assert np.allclose(grey, 100 / 255, atol=4 / 255)
    assert pool.test_y.tolist() == list(range(10)) * 2  # the test split in turns: its first ten, one per class
    splits = data.make_splits(name, None, 5, None, root=str(tmp_path), download=False)
    assert (len(splits.train_y), len(splits.val_y), splits.image_size) == (15, 5, SIZE)


def test_a_folder_without_classes_is_refused(tmp_path):
    (tmp_path / "train").mkdir()
    with pytest.raises(FileNotFoundError, match="no class folders"):
        read_image_folder(tmp_path / "train")


def test_imagenet_reads_every_image_resized_to_256_and_cropped_to_224(tmp_path):
    """ImageNet's folder layout with 3 classes and 12 images each: every image (no cap per class), Salman et
    al.'s evaluation transform (shorter side 256, centre 224): a 256 x 256 image with a 16-pixel red border and
    a blue middle comes out all blue. Missing folders are an error (it is never downloaded)."""
    for split in ("train", "val"):
        for c in range(3):
            d = tmp_path / "imagenet" / split / f"n{c:08d}"
            d.mkdir(parents=True)
            for k in range(12):
                img = np.zeros((256, 256, 3), dtype=np.uint8)
                img[..., 0] = 255
                img[16:240, 16:240] = (0, 0, 20 * k)  # image k: its blue level
                Image.fromarray(img).save(d / f"img_{k:02d}.png")
    pool = data.load_pool("imagenet", str(tmp_path), download=False)
    assert isinstance(pool.train_x, Images) and isinstance(pool.test_x, Images)  # files, decoded when read
    assert pool.train_x.shape == (36, 3, 224, 224) and pool.test_x.shape == (36, 3, 224, 224)
    assert pool.train_y.tolist() == [c for c in range(3) for _ in range(12)]
    assert pool.train_x[:, 0].max() == 0  # no red: the border is cropped away
    # the test split in turns by class: its first images cover every class, each class keeps its sorted order
    assert pool.test_y.tolist()[:6] == [0, 1, 2, 0, 1, 2] and sorted(pool.test_y.tolist()) == pool.train_y.tolist()
    blues = (pool.test_x[pool.test_y == 1][:, 2].mean((1, 2)) * 255).round().tolist()
    assert blues == [20 * k for k in range(12)]  # images 0..11 of the class, in sorted order
    with pytest.raises(FileNotFoundError, match="never downloaded"):
        data.load_pool("imagenet", str(tmp_path / "empty"), download=True)


def test_a_space_on_imagenet_without_its_files_says_it_is_never_downloaded(tmp_path):
    """With `download: false`, a space on ImageNet without its folders is refused up front, naming the root;
    the hint does not offer a download (ImageNet is never downloaded)."""
    from sweep.config.errors import SpecError
    from sweep.config.space import parse_space

    space = {
        "name": "inet",
        "data": {"dataset": "imagenet", "root": str(tmp_path), "download": False},
        "donors": {"r": {"arch": "tv_resnet18", "epochs": 1}},
    }
    with pytest.raises(SpecError, match=r"^data.root: .*never downloaded: copy it there") as err:
        parse_space(space)
    assert "download: true" not in str(err.value)
    for part in ("train", "val"):
        (tmp_path / "imagenet" / part).mkdir(parents=True)
    assert parse_space(space).donors["r"].arch == "tv_resnet18"
