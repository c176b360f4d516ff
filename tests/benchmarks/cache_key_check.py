"""What the node cache's key check costs on its memory-mapped reads (`sweep/worker/cache.py`): `--files` files of
`--mb` megabytes each, written once as a bare tensor (no key) and once as the cache writes them
(`{"key": full key, "value": tensor}`), then read back memory-mapped, interleaved, best of `--rounds`: without
the check (`torch.load(..., mmap=True)` of the bare tensor, then `os.utime`) and with it (the cache's
`_read_tensor`: load, compare the key, `os.utime`). Each read either only opens the file
(`open`) or also sums the tensor (`touch`: every page read from the page cache). The files are read once before
timing, so both sit in the page cache: the cost measured is the check's, not the disk's.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/cache_key_check.py --files 200 --mb 4
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch

from sweep.worker.cache_files import read_tensor as _read_tensor


def _keys(n: int) -> list[tuple]:
    """Keys shaped like an activation chunk's (`sweep.worker.activations.part_key` + ("chunk", start))."""
    part = ("/results/zoo/0123456789abcdef/model.pt", 2_345_678, 1_790_000_000.123, "layer2.1", "f" * 16, "train")
    return [("activations", *part, "fp32", False, "cpu", "a1b2c3d4e5f6", "chunk", 250 * i) for i in range(n)]


def _write(folder: Path, keys: list[tuple], mb: float, keyed: bool) -> list[tuple[Path, str]]:
    folder.mkdir(mode=0o700)
    out = []
    for i, key in enumerate(keys):
        text = repr(key)
        path = folder / f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.pt"
        value = torch.full((int(mb * 2**20) // 4,), float(i))
        torch.save({"key": text, "value": value} if keyed else value, path)
        out.append((path, text))
    return out


def _read(entries, keyed: bool, touch: bool) -> float:
    """Seconds to read every file once."""
    t0 = time.perf_counter()
    for path, text in entries:
        if keyed:
            value = _read_tensor(path, text)
        else:
            value = torch.load(path, mmap=True, weights_only=True)
            os.utime(path)
        assert value is not None
        if touch:
            value.sum()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--mb", type=float, default=4.0, help="megabytes per file (a chunk of 250 images' activations)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cache_key_check_"))
    try:
        keys = _keys(args.files)
        files = {False: _write(root / "bare", keys, args.mb, False), True: _write(root / "keyed", keys, args.mb, True)}
        best = {}
        for touch in (False, True):
            for keyed in (False, True):
                _read(files[keyed], keyed, touch)  # into the page cache
            for _ in range(args.rounds):
                for keyed in (False, True):  # interleaved: the machine's drift falls on both
                    s = _read(files[keyed], keyed, touch)
                    best[touch, keyed] = min(best.get((touch, keyed), s), s)
        print(f"{args.files} files of {args.mb:g} MB, best of {args.rounds} (torch {torch.__version__}):")
        for touch in (False, True):
            bare, keyed = best[touch, False], best[touch, True]
            per = 1e6 / args.files
            print(
                f"  {'touch' if touch else 'open '}: without the check {bare * per:8.1f} us/file,"
                f" with it {keyed * per:8.1f} us/file, +{(keyed - bare) * per:6.1f} us/file ({keyed / bare:.2f}x)"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
