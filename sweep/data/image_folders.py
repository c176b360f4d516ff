"""Datasets in the image-folder layout, `ROOT/<folder>/{train,val}/<class>/*` (one folder per class, classes
numbered in sorted order, files in sorted order), streamed (`sweep.data.stream`): a split is its list of
files, decoded in batches as units read them, with no cap on the images per class.

- `imagenette`, `imagewoof`: Cianfarani et al. 2022's ImageNet subsets (fast.ai's ten-class subsets, their
  160-pixel release), resized (shorter side) and centre-cropped to 160 x 160. With `download` on, a missing
  subset is fetched once from fast.ai's public bucket.
- `imagenet`: ILSVRC 2012, every training image (1,281,167) and every validation image (50,000), resized to
  256 and centre-cropped to 224 (Salman et al. 2020's evaluation transform). Never downloaded.

Pixels in [0, 1], normalised with ImageNet's statistics by the networks. The test split (`val/`) is held in
turns by class (`turns`), so its first N images cover every class: the first 10,000 of ImageNet's are 10 per
class, Jones et al. 2022 4.1's 10,000 validation images.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from sweep.data.core import Pool
from sweep.data.declared import IMAGE_FOLDER_SIZE as SIZE
from sweep.data.stream import Folder, Images, Transform

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
SUFFIXES = {".jpeg", ".jpg", ".png"}
URL = "https://s3.amazonaws.com/fast-ai-imageclas/{folder}.tgz"


def scan(split_dir: Path) -> tuple[np.ndarray, torch.Tensor, list[str]]:
    """The image files under `split_dir/<class>/` (paths relative to `split_dir`, as bytes), their labels
    and the class names, classes and files in sorted order."""
    classes = sorted(e.name for e in os.scandir(split_dir) if e.is_dir()) if split_dir.is_dir() else []
    if not classes:
        raise FileNotFoundError(f"no class folders under {split_dir}")
    paths, labels = [], []
    for label, name in enumerate(classes):
        files = sorted(e.name for e in os.scandir(split_dir / name) if os.path.splitext(e.name)[1].lower() in SUFFIXES)
        paths += [f"{name}/{f}".encode() for f in files]
        labels += [label] * len(files)
    return np.array(paths, dtype=bytes), torch.tensor(labels, dtype=torch.long), classes


def read_image_folder(
    split_dir: Path, size: int = SIZE, resize: int | None = None
) -> tuple[Images, torch.Tensor, list[str]]:
    """Every image under `split_dir/<class>/`, streamed: (N, 3, size, size) in [0, 1] when read, labels,
    class names. The shorter side is resized to `resize` (default: `size`), then the centre square is cut."""
    paths, labels, classes = scan(split_dir)
    return Images(Folder(split_dir, paths, Transform(size, resize or size))), labels, classes


def turns(y: torch.Tensor) -> torch.Tensor:
    """The order that takes images in turns by class (the first of every class, then the second, ...), each
    class keeping its own order: read class by class, a split's first N images (`test_size`, a unit's
    `samples`) would hold only the first classes."""
    turn = torch.zeros_like(y)
    for label in y.unique():
        where = (y == label).nonzero().flatten()
        turn[where] = torch.arange(len(where))
    return torch.argsort(turn * (int(y.max()) + 1) + y) if len(y) else turn


def by_turns(x, y: torch.Tensor) -> tuple:
    order = turns(y)
    return x[order], y[order]


def image_folder_pool(base: Path, size: int, resize: int | None = None) -> Pool:
    """A pool from `base/train` and `base/val` (which must name the same classes), the test split in turns."""
    train_x, train_y, classes = read_image_folder(base / "train", size, resize)
    test_x, test_y, test_classes = read_image_folder(base / "val", size, resize)
    if test_classes != classes:
        raise ValueError(f"{base}: the val classes {test_classes[:4]}... differ from the train ones {classes[:4]}...")
    return Pool(train_x, train_y, *by_turns(test_x, test_y), len(classes), IMAGENET_MEAN, IMAGENET_STD)


def folder_pool(folder: str, size: int, resize: int | None, root: Path, download: bool) -> Pool:
    """A dataset of `register_image_folder`: `root/folder/{train,val}`, never downloaded."""
    base = root / folder
    if not (base / "train").is_dir() or not (base / "val").is_dir():
        raise FileNotFoundError(f"put the train/ and val/ class folders under {base}")
    return image_folder_pool(base, size, resize)


def _subset(folder: str, root: Path, download: bool) -> Pool:
    base = root / folder
    if not (base / "train").is_dir() and download:
        from torchvision.datasets.utils import download_and_extract_archive

        download_and_extract_archive(URL.format(folder=folder), str(root))
    return image_folder_pool(base, SIZE)


def imagenette(root: Path, download: bool) -> Pool:
    """ImageNette (fast.ai): ten easily told apart ImageNet classes."""
    return _subset("imagenette2-160", root, download)


def imagewoof(root: Path, download: bool) -> Pool:
    """ImageWoof (fast.ai): ten ImageNet dog breeds, hard to tell apart."""
    return _subset("imagewoof2-160", root, download)


def imagenet(root: Path, download: bool) -> Pool:
    """ImageNet (ILSVRC 2012) in the image-folder layout, `ROOT/imagenet/{train,val}/<wnid>/*` (val sorted into
    class folders, as torchvision's ImageFolder and the robustness library read it): every image of both
    splits, resized to 256 and centre-cropped to 224. Never downloaded: ImageNet's licence requires fetching it
    yourself."""
    base = root / "imagenet"
    if not (base / "train").is_dir() or not (base / "val").is_dir():
        raise FileNotFoundError(f"ImageNet is never downloaded: put its train/ and val/ class folders under {base}")
    return image_folder_pool(base, 224, resize=256)
