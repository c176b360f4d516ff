"""ImageNet subsets in the image-folder layout (Cianfarani et al. 2022's ImageNette and ImageWoof, fast.ai's
ten-class subsets of ImageNet): `ROOT/<folder>/train/<class>/*` and `ROOT/<folder>/val/<class>/*`, one folder
per WordNet class, classes numbered in sorted order. Images are resized (shorter side) and centre-cropped to
160 x 160 (the subsets' 160-pixel release), pixels in [0, 1], normalised with ImageNet's statistics. With
`download` on, a missing subset is fetched once from fast.ai's public bucket. The test split (`val/`) is held
in turns by class (`by_turns`), so its first N images cover every class.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from sweep.data.core import Pool
from sweep.data.declared import IMAGE_FOLDER_SIZE as SIZE
from sweep.data.declared import IMAGENET_PER_CLASS

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
SUFFIXES = {".jpeg", ".jpg", ".png"}
URL = "https://s3.amazonaws.com/fast-ai-imageclas/{folder}.tgz"


def read_image_folder(
    split_dir: Path, size: int = SIZE, per_class: int | None = None, resize: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """Every image under `split_dir/<class>/` (the first `per_class` of each class in sorted order, when
    given), as (N, 3, size, size) floats in [0, 1], labels, class names. The shorter side is resized to
    `resize` (default: `size`), then the centre `size` x `size` square is cropped."""
    from PIL import Image

    classes = sorted(p.name for p in split_dir.iterdir() if p.is_dir())
    if not classes:
        raise FileNotFoundError(f"no class folders under {split_dir}")
    images, labels = [], []
    for label, name in enumerate(classes):
        paths = sorted(p for p in (split_dir / name).iterdir() if p.suffix.lower() in SUFFIXES)
        for path in paths[:per_class]:
            with Image.open(path) as img:
                images.append(_square(img.convert("RGB"), size, resize or size))
            labels.append(label)
    x = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).float().div_(255)
    return x, torch.tensor(labels, dtype=torch.long), classes


def by_turns(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The images in turns by class (the first of every class, then the second, ...): read class by class, a
    split's first N images (`test_size`, a unit's `samples`) would hold only the first classes."""
    turn = torch.zeros_like(y)
    for label in y.unique():
        where = (y == label).nonzero().flatten()
        turn[where] = torch.arange(len(where))
    order = torch.argsort(turn * (int(y.max()) + 1) + y) if len(y) else turn
    return x[order], y[order]


def _square(img, size: int, resize: int) -> np.ndarray:
    """Resize the shorter side to `resize` (bilinear), then crop the centre `size` square."""
    from PIL import Image

    w, h = img.size
    scale = resize / min(w, h)
    img = img.resize((max(resize, round(w * scale)), max(resize, round(h * scale))), Image.BILINEAR)
    w, h = img.size
    left, top = (w - size) // 2, (h - size) // 2
    return np.asarray(img.crop((left, top, left + size, top + size)), dtype=np.uint8)


def _load(folder: str, root: Path, download: bool) -> Pool:
    base = root / folder
    if not (base / "train").is_dir() and download:
        from torchvision.datasets.utils import download_and_extract_archive

        download_and_extract_archive(URL.format(folder=folder), str(root))
    train_x, train_y, classes = read_image_folder(base / "train")
    test_x, test_y, test_classes = read_image_folder(base / "val")
    if test_classes != classes:
        raise ValueError(f"{base}: the val classes {test_classes} differ from the train classes {classes}")
    return Pool(train_x, train_y, *by_turns(test_x, test_y), len(classes), IMAGENET_MEAN, IMAGENET_STD)


def imagenette(root: Path, download: bool) -> Pool:
    """ImageNette (fast.ai): ten easily told apart ImageNet classes."""
    return _load("imagenette2-160", root, download)


def imagewoof(root: Path, download: bool) -> Pool:
    """ImageWoof (fast.ai): ten ImageNet dog breeds, hard to tell apart."""
    return _load("imagewoof2-160", root, download)


def imagenet(root: Path, download: bool) -> Pool:
    """ImageNet (ILSVRC 2012) in the image-folder layout, `ROOT/imagenet/{train,val}/<wnid>/*` (val sorted into
    class folders, as torchvision's ImageFolder and the robustness library read it): the first 10 images of
    each class of each split in sorted order, the validation ones a fixed 10,000-image subset (Jones et al.
    2022 4.1 draws 10,000 without saying which, held in turns by class), resized to 256 and centre-cropped to
    224 (Salman et al.'s evaluation transform). Never downloaded: ImageNet's licence requires fetching it
    yourself."""
    base = root / "imagenet"
    if not (base / "train").is_dir() or not (base / "val").is_dir():
        raise FileNotFoundError(f"ImageNet is never downloaded: put its train/ and val/ class folders under {base}")
    train_x, train_y, classes = read_image_folder(base / "train", 224, IMAGENET_PER_CLASS, resize=256)
    test_x, test_y, test_classes = read_image_folder(base / "val", 224, IMAGENET_PER_CLASS, resize=256)
    if test_classes != classes:
        raise ValueError(f"{base}: the val classes differ from the train classes")
    return Pool(train_x, train_y, *by_turns(test_x, test_y), len(classes), IMAGENET_MEAN, IMAGENET_STD)
