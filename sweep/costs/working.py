"""A unit's working memory: what it allocates and frees in a batch as it computes, on the CPU (a gradient step's
saved activations and gradients, a forward pass's live activations), from the networks' activation shapes alone.

A gradient step through a network from a stitch point (a stitcher's fit through the frozen rest of the end
network) or from the images (a donor's training) holds `FIT` times the float32 activations of the batch at the
stitch points the gradient flows through (`flowing`): autograd keeps each layer's inputs and outputs inside a
block, and the backward pass their gradients. A no-grad forward holds `LIVE` times its largest activation.
Measured on ResNet-18, VGG-11 and WRN-28-10 at CIFAR-10's shape (`tests/benchmarks/fit_memory.py`). On a GPU this
memory is the device's, not the worker's: `plan` counts it for units that run on the CPU. Torch-free: planning
reads it.
"""

from __future__ import annotations

import math

F32 = 4
CPU_BATCH = 50
"""Images per forward pass of inference on the CPU. A ResNet-18 over 1,000 28x28 or 32x32 images runs in about
0.7x the time of batches of 250-500 (smaller tensors stay in the processor's caches), with the same outputs
bit for bit on the CPU measured, an AMD EPYC (tests/benchmarks/cpu_batch.py; docs/performance.md). GPUs keep
the caller's batch. Training batches are a hyperparameter and never change (`sweep.train.evaluate`)."""
ATTACK_BATCH = 250  # images per batch of an attack: a robust evaluation's, an adversarial validation's (`sweep.train`)
LIVE = 4  # a network's live float32 activations in a no-grad forward, in its largest activation (measured)
FIT = 8.0  # a gradient step's peak above its start, in the activations the gradient flows through (measured: 4.5-8)


def _shapes(arch: str, dataset: str) -> tuple[dict, int]:
    from sweep.registry import ARCHITECTURES, DATASETS

    info = DATASETS[dataset]
    shapes = ARCHITECTURES[arch].activation_shapes(info.channels, info.image_size, info.num_classes)
    return {p: math.prod(s) for p, s in shapes.items()}, info.channels * info.image_size**2


def flowing(arch: str, dataset: str, point: str | None, batch: int) -> int:
    """Bytes of a batch's float32 activations at the stitch points of `arch` from `point` on (the stitcher's
    output, then every later point), or at every point and the images (`point` None, or one the shapes table does
    not list: the whole network, an upper bound)."""
    sizes, image = _shapes(arch, dataset)
    points = list(sizes)
    if point not in sizes:
        return F32 * batch * (sum(sizes.values()) + image)
    return F32 * batch * sum(sizes[p] for p in points[points.index(point) :])


def fit_bytes(arch: str, dataset: str, point: str | None, batch: int) -> int:
    """A gradient step's working memory (`FIT` x `flowing`)."""
    return int(FIT * flowing(arch, dataset, point, batch))


def forward_bytes(arch: str, dataset: str, batch: int = CPU_BATCH) -> int:
    """A no-grad forward pass's working memory: `LIVE` x the batch's largest activation (the images included)."""
    sizes, image = _shapes(arch, dataset)
    return F32 * LIVE * batch * max(image, *sizes.values())
