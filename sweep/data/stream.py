"""Image folders as streams: a split of ImageNet is a list of files, decoded in batches when a consumer reads
them, never a tensor of every image.

`Images` stands where a split's image tensor stands (`Splits.train_x`, ...): it has a tensor's length, shape
and dtype, and indexing it (a slice, an index tensor, a mask) gives another `Images` over the chosen files,
without decoding anything. Pixels appear only when a consumer reads:

- `chunks(x, batch)` (what every pass over a split uses: training epochs, activations, predictions, attacks,
  inversions) reads the files through torchvision's `DataLoader`: decoding, resizing and cropping run in
  `workers()` worker processes, a few batches ahead of the training thread. The same function slices an
  in-memory tensor, so a consumer is written once for both.
- `x[i]` decodes one image; `x.to(device)`, `x.numpy()` and torch functions decode the view whole, which is
  refused above `LIMIT_BYTES` (float32 pixels): a consumer that would hold a whole ImageNet split fails with
  the count, instead of exhausting the host.

`Stored` is the same for 8-bit images already in memory (a split of CIFAR-10 or Fashion-MNIST, cut from a
dataset read as its files store it: `sweep.data.core.make_splits`): `Images` over a `Stored` keep the pixels as
uint8, a quarter of float32's memory, and `chunks` converts each batch (`x / 255`, elementwise: the same bits as
converting the whole split first); a consumer that asks for them whole gets floats, with no limit (they are in
memory already), and AutoAttack is given them whole as it is given a tensor.

Decoding is PIL's, through torchvision's functional transforms: the shorter side resized (bilinear, with
antialiasing) to `resize`, the centre `size` square cropped, exactly the `Resize(resize)`, `CenterCrop(size)`
evaluation transform of the papers' ImageNet code. Batches leave the workers as 8-bit pixels (a quarter of
float32's shared memory) and become [0, 1] floats on the training thread, as the in-memory datasets are.
Augmentations (`sweep.data.augment`) run on the batch after it arrives, on the unit's device, with the unit's
generator: the same draws as for an in-memory dataset.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

LIMIT_BYTES = 2**30  # the most float32 pixels a stream decodes into one tensor (about 1,700 images at 224 px)
_WORKERS = [0]  # loader worker processes per unit: set from the unit's CPUs (`configure`)


def loader_workers(cpus: float) -> int:
    """Worker processes for a unit with `cpus` CPUs: all but the one the training thread runs on (0 for one
    CPU: the unit decodes its own batches)."""
    return max(0, int(cpus) - 1)


def configure(workers: int) -> None:
    """How many worker processes every stream of this process decodes with (`loader_workers`)."""
    _WORKERS[0] = max(0, int(workers))


def workers() -> int:
    return _WORKERS[0]


@contextlib.contextmanager
def decoding_with(n: int):
    """`configure(n)` for the duration of a block (tests, benchmarks)."""
    before = workers()
    configure(n)
    try:
        yield
    finally:
        configure(before)


@dataclass(frozen=True)
class Transform:
    """A file to (3, size, size) 8-bit pixels: shorter side to `resize`, centre `size` crop."""

    size: int
    resize: int

    def __call__(self, path: str) -> torch.Tensor:
        import torchvision.transforms.functional as tf
        from PIL import Image

        with Image.open(path) as img:
            img = tf.center_crop(tf.resize(img.convert("RGB"), self.resize), self.size)
            return tf.pil_to_tensor(img)


class Folder(torch.utils.data.Dataset):
    """The files of one split, `root/<relative path>`, in a fixed order (an array of bytes: a million paths
    cost 50 MB, shared with the workers without copying)."""

    def __init__(self, root: Path, paths: np.ndarray, transform: Transform) -> None:
        self.root, self.paths, self.transform = str(root), paths, transform

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.transform(os.path.join(self.root, self.paths[int(i)].decode()))

    @property
    def item_shape(self) -> tuple[int, ...]:
        return (3, self.transform.size, self.transform.size)

    device = torch.device("cpu")

    def where(self) -> str:
        return f"files under {self.root}"

    def fingerprint(self, index: np.ndarray) -> str:
        """The view's files (a stride of at most 64: their paths and sizes) and its length: two roots that
        hold different images under one name, or a file replaced, give different fingerprints."""
        h = hashlib.sha256(repr((self.transform, len(index))).encode())
        for i in index[:: max(1, len(index) // 64)]:
            rel = self.paths[int(i)]
            h.update(rel + str(os.path.getsize(os.path.join(self.root, rel.decode()))).encode())
        return h.hexdigest()[:16]


class Stored(torch.utils.data.Dataset):
    """8-bit images in memory (a uint8 tensor, N x C x H x W, on the CPU or a device), as a `Folder` is files."""

    def __init__(self, data: torch.Tensor) -> None:
        if data.dtype != torch.uint8 or data.dim() != 4:
            raise ValueError(f"stored images: expected a 4-D uint8 tensor, found {data.dtype} {tuple(data.shape)}")
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.data[int(i)]

    @property
    def item_shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape[1:])

    @property
    def device(self) -> torch.device:
        return self.data.device

    def where(self) -> str:
        return "8-bit images in memory"

    def batch(self, index: torch.Tensor) -> torch.Tensor:
        """The images at `index` as [0, 1] floats (on the data's device)."""
        return self.data[index.to(self.data.device)].float().div_(255)

    def fingerprint(self, index: np.ndarray) -> str:
        """The view's length, shape and a stride of its pixels (at most 4,096 values)."""
        h = hashlib.sha256(repr((len(index), self.item_shape)).encode())
        if len(index):
            step = max(1, len(index) // 64)
            rows = self.data[torch.from_numpy(index[::step]).to(self.data.device)].reshape(-1)
            h.update(rows[:: max(1, len(rows) // 4096)].cpu().numpy().tobytes())
        return h.hexdigest()[:16]


class Images:
    """Images of a `Folder` (or a `Stored` tensor), chosen by `index`, standing where a float tensor of them
    would (see the module)."""

    dtype = torch.float32
    ndim = 4

    def __init__(self, source: Folder | Stored, index: np.ndarray | None = None) -> None:
        self.source = source
        self.index = np.arange(len(source), dtype=np.int64) if index is None else np.asarray(index, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.index)

    @property
    def shape(self) -> torch.Size:
        return torch.Size((len(self), *self.source.item_shape))

    @property
    def device(self) -> torch.device:
        return self.source.device

    @property
    def in_memory(self) -> bool:
        """Whether the images are 8-bit pixels in memory (`Stored`), not files."""
        return isinstance(self.source, Stored)

    def moved(self, device: torch.device) -> Images:
        """The view with its stored pixels on `device` (files stay files: their batches move)."""
        if not self.in_memory:
            return self
        return Images(Stored(self.source.data[torch.from_numpy(self.index)].to(device)))

    def dim(self) -> int:
        return 4

    def size(self, d: int | None = None):
        return self.shape if d is None else self.shape[d]

    def element_size(self) -> int:
        return 4

    def numel(self) -> int:
        return self.shape.numel()

    def __repr__(self) -> str:
        return f"Images({len(self)} {self.source.where()}, {tuple(self.shape[1:])})"

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)) or (isinstance(key, torch.Tensor) and key.dim() == 0):
            return self.source[self.index[int(key)]].float().div_(255)
        if isinstance(key, slice):
            return Images(self.source, self.index[key])
        if isinstance(key, tuple):  # pixels asked for (x[:, 0]): decode the view
            return self.materialise()[key]
        key = key.cpu().numpy() if isinstance(key, torch.Tensor) else np.asarray(key)
        return Images(self.source, self.index[key])

    def materialise(self) -> torch.Tensor:
        """The view's images as one (N, C, H, W) float tensor in [0, 1]; files are refused above `LIMIT_BYTES`."""
        if self.in_memory:
            return self.source.batch(torch.from_numpy(self.index))
        need = self.numel() * 4
        if need > LIMIT_BYTES:
            raise MemoryError(
                f"{len(self)} streamed images ({need / 2**20:,.1f} MiB as float32) asked for as one tensor, more"
                f" than {LIMIT_BYTES / 2**20:,.1f} MiB: read them in batches (sweep.data.stream.chunks)"
            )
        parts = list(chunks(self, 64))
        return torch.cat(parts) if parts else torch.zeros(tuple(self.shape))

    def to(self, *args, **kwargs) -> torch.Tensor:
        return self.materialise().to(*args, **kwargs)

    def cpu(self) -> torch.Tensor:
        return self.materialise()

    def float(self) -> torch.Tensor:
        return self.materialise()

    def numpy(self) -> np.ndarray:
        return self.materialise().numpy()

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = self.numpy()
        return out if dtype is None else out.astype(dtype)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """A torch function given streamed images (torch.cat, torch.stack, ...) sees them decoded."""

        def solid(a):
            if isinstance(a, Images):
                return a.materialise()
            if isinstance(a, (list, tuple)):
                return type(a)(solid(b) for b in a)
            return a

        return func(*solid(args), **{k: solid(v) for k, v in (kwargs or {}).items()})


def is_stream(x) -> bool:
    return isinstance(x, Images)


def chunks(x, batch: int, order: torch.Tensor | None = None) -> Iterator[torch.Tensor]:
    """`x` (a tensor, or streamed `Images`) in batches of `batch` images, in `order` when given (indices into
    `x`), else from the first. A tensor is sliced (indexed by the order moved once to its device); streamed
    images are decoded by a `DataLoader` with `workers()` worker processes, ahead of the caller."""
    n = len(x)
    if not is_stream(x):
        if order is None:
            yield from (x[i : i + batch] for i in range(0, n, batch))
        else:
            on = order.to(x.device)
            yield from (x[on[i : i + batch]] for i in range(0, n, batch))
        return
    index = x.index if order is None else x.index[order.cpu().numpy()]
    if not len(index):
        return
    if x.in_memory:  # no decoding to do: sliced and converted batch by batch, on the data's device
        on = torch.from_numpy(index).to(x.device)
        yield from (x.source.batch(on[i : i + batch]) for i in range(0, len(on), batch))
        return
    w = workers() if len(index) > batch else 0  # one batch: no process is worth starting
    loader = torch.utils.data.DataLoader(
        torch.utils.data.Subset(x.source, index.tolist()),
        batch_size=batch,
        num_workers=w,
        prefetch_factor=2 if w else None,
        persistent_workers=False,
    )
    for xb in loader:
        yield xb.float().div_(255)


def in_pieces(x, most: int) -> list:
    """`x` whole when it is a tensor, else views of at most `most` images (fewer where `LIMIT_BYTES` says so):
    for a consumer that needs its images as one tensor (AutoAttack's evaluation), bounded when they stream."""
    if not is_stream(x) or x.in_memory:
        return [x]
    most = max(1, min(most, LIMIT_BYTES // max(1, x[:1].numel() * 4)))
    return [x[i : i + most] for i in range(0, len(x), most)]
