"""Datasets as [0, 1] image tensors and their deterministic splits (`core.py`: the dataset registry, the
MNIST family and the digits; `torchvision_sets.py`: CIFAR-10, SVHN, MNIST through torchvision;
`image_folders.py`: the ImageNet subsets ImageNette and ImageWoof; `colour_digits.py`: Smith & Marcu 2024's
colour-digit variants of the MNIST family; `augment.py`: donor training augmentations)."""

from sweep.data import colour_digits as _colour_digits  # noqa: F401  (registers its datasets)
from sweep.data import image_folders as _image_folders  # noqa: F401  (registers its datasets)
from sweep.data import torchvision_sets as _torchvision_sets  # noqa: F401  (registers its datasets)
from sweep.data.core import (
    DATASETS,
    Pool,
    Splits,
    batches,
    data_root,
    load_pool,
    make_splits,
    missing_files,
    register_dataset,
    test_images,
)

__all__ = [
    "DATASETS",
    "Pool",
    "Splits",
    "batches",
    "data_root",
    "load_pool",
    "make_splits",
    "missing_files",
    "register_dataset",
    "test_images",
]
