"""The worker cache's files in the node's folder: each one tensor under its full key, written atomically and
read back only when the key matches; the folder kept within its byte budget, oldest files first. And `nbytes`,
what the cache counts an entry as."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any


def nbytes(obj: Any) -> int:
    """The bytes of every tensor in `obj`: a tensor, a module (parameters and buffers), a dataclass, a
    sequence or mapping of those."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, torch.nn.Module):
        return sum(nbytes(t) for t in (*obj.parameters(), *obj.buffers()))
    if isinstance(obj, dict):
        return sum(nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(nbytes(v) for v in obj)
    if hasattr(obj, "__dataclass_fields__"):
        return sum(nbytes(getattr(obj, f)) for f in obj.__dataclass_fields__)
    return 0


def read_tensor(path: Path, key: str):
    """The tensor of the file at `path` when the file holds it under the full `key`; else None (recompute):
    absent, torn by a writer that died, unreadable, another format, or planted or stale under this name."""
    import torch

    try:
        held = torch.load(path, mmap=True, weights_only=True)
    except Exception:
        return None
    if not isinstance(held, dict) or held.get("key") != key or not isinstance(held.get("value"), torch.Tensor):
        return None
    with contextlib.suppress(OSError):  # another user's file in a shared folder
        os.utime(path)  # recently used: evicted last
    return held["value"]


def write_tensor(entry: tuple[Path, str], value, disk_budget: int) -> None:
    """Write `{"key": full key, "value": tensor}` atomically (a temporary name, then a rename); a full disk or a
    folder this user cannot write only costs the sharing, never the unit. Oldest files are removed first to
    stay within `disk_budget`."""
    import torch

    path, key = entry
    size = nbytes(value)
    if size > disk_budget:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        make_room(path.parent, disk_budget - size)
        torch.save({"key": key, "value": value.detach().cpu() if value.device.type != "cpu" else value}, tmp)
        os.replace(tmp, path)
    except Exception:  # torch.save raises RuntimeError, not OSError, for a path it cannot write
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def make_room(folder: Path, budget: int) -> None:
    files = []
    for f in [*folder.glob("*.pt"), *folder.glob(".*.tmp")]:  # temporary files of writers that died count too
        with contextlib.suppress(OSError):
            st = f.stat()
            files.append((st.st_mtime, st.st_size, f))
    total = sum(s for _, s, _ in files)
    for _, size, f in sorted(files):
        if total <= budget:
            break
        with contextlib.suppress(OSError):
            f.unlink()
            total -= size
