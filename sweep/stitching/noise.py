"""Clustered-noise senders (Smith & Marcu 2024, Algorithms 1-2 and B.2): a sender that is not a network.

For a receiver and a stitch point, each class gets a random base activation of the receiver's activation shape
there, uniform on [0, 1) (Algorithm 1); a sample of class c is clamp(base_c + sigma N(0, 1), 0, 1) (Algorithm 2),
`train_per_class` of them per class to train the stitcher and `test_per_class` to test it (the paper: 6,000 and
1,000). The base activations are drawn anew for every (trial seed, receiver, point), "to reduce the likelihood
that results are due to one randomly selected set of points" (B.2).

Samples are drawn when read (`NoiseSamples`): sample i of a trial has its own generator, seeded from the trial
and i, so a shuffled batch is the same samples in any order, on any device, held or not. A part is held only
when it fits the worker's memory budget (`keep_bytes`); otherwise a batch is drawn as it is read and dropped,
so VGG-19's `features.2` on MNIST (60,000 samples, 15.7 GB) holds none. Drawing costs about 0.8 ms a sample at
64 x 32 x 32 on one CPU core (`tests/benchmarks/noise_memory.py`).
"""

from __future__ import annotations

import hashlib
import math

import torch

from sweep.data.core import Splits

SEEDS = 2**32  # torch's CPU generator (MT19937) takes the low 32 bits of a seed


def noise_seed(seed: int, receiver_key: str, point: str) -> int:
    """The generator seed of one (seed, receiver, point): the seed is the trial's, or the sender's own
    (`noise: {seed: N}`), which holds the samples fixed across a block's seeds (stitcher initialisations)."""
    digest = hashlib.sha256(f"noise|{seed}|{receiver_key}|{point}".encode()).hexdigest()
    return int(digest[:15], 16)


class NoiseSamples:
    """One part of a noise sender's samples, drawn when indexed: sample i is clamp(base[i mod C] + sigma z_i,
    0, 1) with z_i ~ N(0, I) from a generator seeded (first + i) mod 2^32 (distinct seeds for every sample of
    a trial), drawn on the CPU and moved to `device`. It answers what the engine's loops ask of an image
    tensor: `len`, `shape`, `dtype`, `device`, `dim()`, indexing (an int, a slice, indices or a mask) and
    `to(device)`; `x[:]` is the whole part as a tensor."""

    def __init__(self, base: torch.Tensor, sigma: float, n: int, first: int, device: torch.device | None = None):
        self.base, self.sigma, self.n, self.first = base, sigma, n, first
        self.device = torch.device("cpu") if device is None else torch.device(device)

    @property
    def shape(self) -> torch.Size:
        return torch.Size((self.n, *self.base.shape[1:]))

    @property
    def dtype(self) -> torch.dtype:
        return self.base.dtype

    def __len__(self) -> int:
        return self.n

    def dim(self) -> int:
        return self.base.dim()

    def numel(self) -> int:
        return self.shape.numel()

    def to(self, device, *args, **kwargs) -> NoiseSamples:
        return NoiseSamples(self.base, self.sigma, self.n, self.first, device)

    def __getitem__(self, key) -> torch.Tensor:
        if isinstance(key, torch.Tensor):
            key = key.cpu()
        idx = torch.arange(self.n)[key]
        if idx.dim() == 0:
            return self[idx.reshape(1)][0]
        x = torch.empty((len(idx), *self.base.shape[1:]), dtype=self.dtype)
        gen = torch.Generator()
        for row, i in zip(x, idx.tolist()):  # one sample at a time: the same arithmetic in any batch, on any CPU
            gen.manual_seed((self.first + i) % SEEDS)
            torch.randn(row.shape, generator=gen, out=row)
            row.mul_(self.sigma).add_(self.base[i % len(self.base)]).clamp_(0.0, 1.0)  # Algorithm 2
        return x.to(self.device)

    def __repr__(self) -> str:
        return f"NoiseSamples(n={self.n}, shape={tuple(self.shape[1:])}, sigma={self.sigma}, device={self.device})"


def noise_splits(
    shape: tuple[int, ...],
    num_classes: int,
    sigma: float,
    train_per_class: int,
    test_per_class: int,
    val_size: int,
    seed: int,
    keep_bytes: int = 0,
) -> Splits:
    """Training, validation (`val_size` samples, balanced) and test samples of clustered noise, the classes in
    turns (0, 1, ..., C-1, 0, 1, ...): whatever reads the first N of a split (the receiver rank's
    `similarity_samples`, a DM fit's `dm_samples`) reads every class, N // C or N // C + 1 samples of each.
    Each part is `NoiseSamples`, drawn when read, or a tensor of the same samples where it takes at most
    `keep_bytes`."""
    gen = torch.Generator().manual_seed(seed)
    base = torch.rand((num_classes, *shape), generator=gen)  # Algorithm 1
    first = int(hashlib.sha256(f"noise-samples|{seed}".encode()).hexdigest()[:8], 16)
    parts = []
    for per_class in (train_per_class, math.ceil(val_size / num_classes) if val_size else 0, test_per_class):
        n = num_classes * per_class
        x = NoiseSamples(base, sigma, n, first)
        parts += [x[:] if x.numel() * base.element_size() <= keep_bytes else x, torch.arange(n) % num_classes]
        first += n  # the parts' samples have seeds of their own
    return Splits(*parts, num_classes, (0.0,), (1.0,), split_id=f"noise-{seed:x}")
