"""Datasets as [0, 1] image tensors and their deterministic splits (`declared.py`: the dataset registry's
entries, without PyTorch; `core.py`: pools, splits, the MNIST family and the digits; `torchvision_sets.py`:
CIFAR-10, SVHN, MNIST through torchvision; `image_folders.py`: ImageNet, its subsets ImageNette and
ImageWoof, and image folders of your own, streamed (`stream.py`: files decoded in batches by loader workers);
`colour_digits.py`: Smith & Marcu 2024's colour-digit variants of the MNIST family; `augment.py`: donor
training augmentations).

The names below load their module on first use (PEP 562), so that reading the registry imports no PyTorch.
"""

from __future__ import annotations

from sweep.store.exports import lazy_exports

_HOME = {
    **dict.fromkeys(
        ["DATASETS", "data_root", "missing_files", "register_dataset", "register_image_folder"], "declared"
    ),
    **dict.fromkeys(["Pool", "Splits", "batches", "load_pool", "make_splits", "test_images"], "core"),
}
__all__ = sorted(_HOME)


__getattr__, __dir__ = lazy_exports(__name__, _HOME, globals())
