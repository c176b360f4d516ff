"""The registered datasets as a search space is checked against them: sizes, image shape, classes, threat
model and the files each needs, without PyTorch. Each entry's `load` names its loader ("module:function"),
imported the first time a dataset is read (`sweep.registry.lazy`). `register_dataset` adds a dataset of your
own (a loader `fn(root, download) -> Pool`)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sweep.registry import AUGMENTATIONS, DATASETS, lazy

MNIST_THREAT = (0.3, 0.1)  # Balogh & Jelasity 2023 A.4: eps and PGD step for the MNIST family (digits too)
CIFAR_THREAT = (8 / 255, 2 / 255)  # Balogh & Jelasity 2023 A.3: eps and PGD step for CIFAR-10 and SVHN
IMAGENET_THREAT = (4 / 255, 1 / 255)  # Cianfarani et al. 2022 2.3: eps 4/255 on the ImageNet subsets
IMAGE_FOLDER_SIZE = 160  # ImageNette and ImageWoof: fast.ai's 160-pixel release, centre crops of 160
IMAGENET_SIZES = (1_281_167, 50_000)  # ILSVRC 2012's training and validation images, every one streamed
MNIST_FILES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]
DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
COLOUR_VARIANTS = ("correlated", "digit", "colour", "colour_only", "rgb")  # Smith & Marcu 2024's (colour_digits)
# The ten background colours of Bahng et al. 2020's colour-MNIST, which the colour variants paint from (0-255 RGB)
COLOUR_MAP = (
    (255, 0, 0),
    (0, 255, 0),
    (0, 0, 255),
    (225, 225, 0),
    (225, 0, 225),
    (0, 255, 255),
    (255, 128, 0),
    (255, 0, 128),
    (128, 0, 255),
    (128, 128, 128),
)
COLOUR_BASES = ("mnist", "fashion_mnist")  # the registered 1-channel 28 x 28 datasets with enough images


def data_root() -> Path:
    return Path(os.environ.get("STITCHSWEEP_DATA", Path.home() / ".cache" / "stitchsweep" / "data"))


@dataclass(frozen=True)
class DatasetInfo:
    """What a search space is validated against without loading any image."""

    load: Callable  # (root, download) -> Pool
    train_pool: int  # images available for train + val
    test: int  # images of the official test split
    channels: int
    image_size: int
    # The files `load` needs under a root when it may not download (empty: nothing to fetch).
    required: Callable[[Path], list[Path]] = lambda root: []
    num_classes: int = 10
    # The L-inf threat model of Balogh & Jelasity 2023 A.3/A.4 for this dataset: (eps, PGD step size). 0.3 and 0.1 for
    # the MNIST family (digits included), 8/255 and 2/255 for the 32x32 colour datasets.
    threat: tuple[float, float] = MNIST_THREAT
    downloadable: bool = True  # False: never fetched (ImageNet's licence); errors then say so
    palette: tuple | None = None  # the colours (0-255 RGB) a dataset paints its images with, if any
    pixel_bytes: int = 4  # bytes a pixel value takes as the loader keeps it: float32, or 1 for 8-bit pixels
    # `(root, download) -> (test_x, test_y)`: the official test set alone, read without the training pool, for a
    # unit that reads only test images (a similarity unit, a donor's evaluation); None: the whole dataset is read
    load_test: Callable | None = None
    # `(root, download, index) -> (Pool, n)`: the dataset with only its training images at `index` (in that order)
    # in its training part, the rest of the training files not kept, and how many training images the files hold;
    # what a split is read with (`sweep.data.core.read_split`); None: the whole dataset is read
    load_rows: Callable | None = None

    def missing_files(self, root: Path | None) -> list[Path]:
        """The files this dataset lacks under `root` (default: the data root): what it would download."""
        return [p for p in self.required(root or data_root()) if not p.exists()]


def register_dataset(
    name: str,
    train_pool: int,
    test: int,
    channels: int = 1,
    image_size: int = 28,
    required: Callable[[Path], list[Path]] | None = None,
    num_classes: int = 10,
    threat: tuple[float, float] = MNIST_THREAT,
    downloadable: bool = True,
    palette: tuple | None = None,
    aliases: tuple[str, ...] = (),
    pixel_bytes: int = 4,
    load_test: Callable | str | None = None,
    load_rows: Callable | str | None = None,
):
    """Decorator: register a loader `fn(root, download) -> Pool` (or its "module:function" name, imported
    when first called) with what validation needs to know; `aliases`: other names users write for it (a
    misspelt dataset gets the suggestion); `pixel_bytes`: 1 where the loader returns 8-bit pixels (uint8),
    which the planner sizes a worker's images by; `load_test`: a reader of the official test set alone (the
    function or its "module:function" name), what a unit that reads only test images then reads; `load_rows`: a
    reader of chosen training images (`DatasetInfo.load_rows`), what a split is read with."""
    DATASETS.alias(name, *aliases)

    def make(fn):
        load = lazy(fn) if isinstance(fn, str) else fn
        return DatasetInfo(
            load, train_pool, test, channels, image_size, required or (lambda root: []), num_classes, threat,
            downloadable, palette, pixel_bytes, *(lazy(f) if isinstance(f, str) else f for f in (load_test, load_rows)),
        )  # fmt: skip

    return DATASETS.register(name, make)


def missing_files(name: str, root: Path | None) -> list[Path]:
    """The files dataset `name` lacks under `root` (what it would have to download)."""
    return DATASETS.get_entry(name).missing_files(root)


def find_idx_dir(candidates: list[Path]) -> Path | None:
    """The first folder holding the MNIST family's training images (IDX, gzipped or not)."""
    for d in candidates:
        if (d / "train-images-idx3-ubyte.gz").exists() or (d / "train-images-idx3-ubyte").exists():
            return d
    return None


def fashion_candidates(root: Path) -> list[Path]:
    return [root / "fashion-mnist", root / "FashionMNIST" / "raw", DEBIAN_FASHION_MNIST]


def _fashion_required(root: Path) -> list[Path]:
    if find_idx_dir(fashion_candidates(root)) is not None:
        return []
    return [root / "FashionMNIST" / "raw" / f for f in MNIST_FILES]


def _cifar_required(root: Path) -> list[Path]:
    return [root / "cifar-10-batches-py" / f for f in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]]


def _svhn_required(root: Path) -> list[Path]:
    return [root / "train_32x32.mat", root / "test_32x32.mat"]


def _mnist_required(root: Path) -> list[Path]:
    return [root / "MNIST" / "raw" / f for f in MNIST_FILES]


def _folder_required(folder: str):
    return lambda root: [root / folder / "train", root / folder / "val"]


_SETS = "sweep.data.torchvision_sets"
register_dataset(
    "fashion_mnist", 60000, 10000, required=_fashion_required, aliases=("fmnist",), pixel_bytes=1,
    load_test="sweep.data.core:fashion_mnist_test", load_rows="sweep.data.core:fashion_mnist_rows",
)("sweep.data.core:fashion_mnist")  # fmt: skip
register_dataset("digits", 1797 - 1797 // 5, 1797 // 5, aliases=("sklearn_digits",))("sweep.data.core:digits")
_COLOUR = dict(channels=3, image_size=32, threat=CIFAR_THREAT, pixel_bytes=1)  # the files' 8-bit pixels
_TORCHVISION = (("cifar10", (50000, 10000), _cifar_required), ("svhn", (73257, 26032), _svhn_required))
for _name, _sizes, _required in _TORCHVISION:
    register_dataset(
        _name, *_sizes, required=_required, load_test=f"{_SETS}:{_name}_test", load_rows=f"{_SETS}:{_name}_rows",
        **_COLOUR,
    )(f"{_SETS}:{_name}")  # fmt: skip
register_dataset(
    "mnist", 60000, 10000, required=_mnist_required, pixel_bytes=1, load_test=f"{_SETS}:mnist_test",
    load_rows=f"{_SETS}:mnist_rows",
)(f"{_SETS}:mnist")  # fmt: skip
for _base in COLOUR_BASES:
    _info = DATASETS.get_entry(_base)
    for _variant in COLOUR_VARIANTS:
        register_dataset(
            f"{_base}_{_variant}",
            train_pool=_info.train_pool,
            test=_info.test,
            channels=3,
            image_size=28,
            required=_info.required,
            num_classes=_info.num_classes,
            threat=_info.threat,
            palette=None if _variant == "rgb" else COLOUR_MAP,
        )(functools.partial(lazy("sweep.data.colour_digits:colour_pool"), _base, _variant))
_FOLDER = dict(channels=3, image_size=IMAGE_FOLDER_SIZE, threat=IMAGENET_THREAT)
register_dataset("imagenette", 9469, 3925, required=_folder_required("imagenette2-160"), **_FOLDER)(
    "sweep.data.image_folders:imagenette"
)
register_dataset("imagewoof", 9025, 3929, required=_folder_required("imagewoof2-160"), **_FOLDER)(
    "sweep.data.image_folders:imagewoof"
)
register_dataset(
    "imagenet",
    train_pool=IMAGENET_SIZES[0],
    test=IMAGENET_SIZES[1],
    channels=3,
    image_size=224,
    required=_folder_required("imagenet"),
    num_classes=1000,
    threat=IMAGENET_THREAT,
    downloadable=False,
    aliases=("ilsvrc", "ilsvrc2012", "imagenet1k"),
)("sweep.data.image_folders:imagenet")


def register_image_folder(
    name: str,
    folder: str,
    train_pool: int,
    test: int,
    image_size: int,
    resize: int | None = None,
    num_classes: int = 10,
    threat: tuple[float, float] = IMAGENET_THREAT,
) -> None:
    """Register a dataset of your own in the image-folder layout, `ROOT/<folder>/{train,val}/<class>/*`:
    streamed like ImageNet (`sweep.data.stream`), each image's shorter side resized to `resize` (default:
    `image_size`) and its centre `image_size` square cropped. `train_pool` and `test` are the images a space is
    checked against before any file is read."""
    load = functools.partial(lazy("sweep.data.image_folders:folder_pool"), folder, image_size, resize)
    register_dataset(
        name, train_pool, test, channels=3, image_size=image_size, required=_folder_required(folder),
        num_classes=num_classes, threat=threat,
    )(load)  # fmt: skip


def register_augmentation(name: str):
    """Decorator: register `fn(x, generator) -> x'`, applied to whole batches of [0, 1] pixels."""
    return AUGMENTATIONS.register(name)


# Donor training augmentations (Balogh & Jelasity 2023 A.2; `sweep.data.augment`).
for _name, _fn in (("crop", "random_crop"), ("flip", "random_flip"), ("affine", "random_affine")):
    AUGMENTATIONS.add(_name, lazy(f"sweep.data.augment:{_fn}"))
