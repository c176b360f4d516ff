"""Streaming an image folder (`sweep.data.stream`): a generated folder of JPEGs at 224 px in ImageNet's layout,
read by the `imagenet` dataset's transform (shorter side to 256, centre 224 crop).

1. A full decode-resize-crop pass over every image (`chunks`, batches of 250), with the process tree's peak
   resident memory (this process and its loader workers, sampled every 20 ms; shared pages count once per
   process, so this overstates it).
2. A torchvision ResNet-18 (random weights, eval mode) over the first `--model-images` images: once through the
   loader (`sweep.train.evaluate.activations` on the streamed images) and once on the same images preloaded as
   one float32 tensor; the ratio of the two walls (the decoding is off the training thread when it keeps up).

    PYTHONPATH=. .venv/bin/python tests/benchmarks/stream_folder.py --folder /tmp/stream_bench --images 20000

The folder is written once (`--folder`; about 15 KB per image) and reused. `--workers` sets the loader's
processes (default: all CPUs but one, as a unit with every CPU of the machine gets).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sweep.data import stream  # noqa: E402
from sweep.data.image_folders import read_image_folder  # noqa: E402
from sweep.train.evaluate import activations  # noqa: E402

CLASSES = 100


def write(folder: Path, images: int) -> None:
    """`images` JPEGs (quality 90) of smooth random colour fields, 224 px on the shorter side, in `CLASSES`
    class folders; skipped when the folder already holds them."""
    from PIL import Image

    if folder.is_dir() and sum(1 for _ in folder.rglob("*.JPEG")) >= images:
        return
    gen = np.random.default_rng(0)
    t0 = time.perf_counter()
    for i in range(images):
        d = folder / f"n{i % CLASSES:08d}"
        d.mkdir(parents=True, exist_ok=True)
        coarse = gen.integers(0, 256, (7, 9, 3), dtype=np.uint8)  # upsampled: a photo-like JPEG size
        img = Image.fromarray(coarse).resize((280 + (i % 5) * 8, 224), Image.BICUBIC)
        img.save(d / f"{i:06d}.JPEG", quality=90)
    print(f"wrote {images} JPEGs in {time.perf_counter() - t0:.0f} s")


class PeakRSS:
    """The largest sum of resident memory of this process and its children, sampled in a thread."""

    def __init__(self) -> None:
        self.peak, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total = me.memory_info().rss
            for child in me.children(recursive=True):
                try:
                    total += child.memory_info().rss
                except psutil.NoSuchProcess:
                    pass
            self.peak = max(self.peak, total)
            time.sleep(0.02)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folder", type=Path, default=Path("/tmp/stream_bench"))
    ap.add_argument("--images", type=int, default=20000)
    ap.add_argument("--model-images", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=max(0, (os.cpu_count() or 1) - 1))
    args = ap.parse_args()
    write(args.folder, args.images)
    torch.set_num_threads(os.cpu_count() or 1)
    stream.configure(args.workers)
    x, _, _ = read_image_folder(args.folder, 224, resize=256)
    x = x[: args.images]
    print(f"{len(x)} images, {args.workers} loader workers, {torch.get_num_threads()} torch threads")

    with PeakRSS() as rss:
        t0 = time.perf_counter()
        n = sum(len(b) for b in stream.chunks(x, 250))
        wall = time.perf_counter() - t0
    print(f"full pass: {n} images in {wall:.1f} s ({n / wall:.0f} images/s), peak RSS {rss.peak / 2**30:.2f} GiB")

    import torchvision

    model = torchvision.models.resnet18(num_classes=1000).eval()
    sub = x[: args.model_images]
    activations(model, torch.zeros(2, 3, 224, 224), torch.device("cpu"))  # warm up
    t0 = time.perf_counter()
    streamed = activations(model, sub, torch.device("cpu"), 250)
    through_loader = time.perf_counter() - t0
    held = torch.cat([p.materialise() for p in stream.in_pieces(sub, 1000)])
    t0 = time.perf_counter()
    preloaded = activations(model, held, torch.device("cpu"), 250)
    in_memory = time.perf_counter() - t0
    same = torch.equal(streamed.argmax(1), preloaded.argmax(1))
    print(
        f"ResNet-18 on {len(sub)} images: through the loader {through_loader:.1f} s, preloaded {in_memory:.1f} s,"
        f" ratio {through_loader / in_memory:.3f}; same classes: {same}"
    )


if __name__ == "__main__":
    main()
