"""What a worker process keeps between the units it runs: a byte-bounded LRU of donors, data splits (or a
unit's test images alone), donors-table rows and activations, and a node-local folder of activation files
that the workers of one machine share.

Every entry is a pure function of its key: a donor of its checkpoint file (path, size, modification time),
splits of their dataset, sizes, data root and device, test images of their dataset, count and data root,
activations of (checkpoint, point, the split's content fingerprint, part, precision, memory layout, device
kind, code version: `sweep.worker.activations`). So a cached run records the same rows as an uncached one;
`STITCHSWEEP_CACHE=off` (or `stitchsweep run --cache off`) turns every level off. None of these settings is
part of a unit's identity.

Levels:
- memory: one LRU per process under `STITCHSWEEP_CACHE_MB` (default 2048) megabytes, counting every tensor of
  an entry (a donor's parameters and buffers, a split's images, an activation tensor). An entry larger than
  the budget is computed and not kept.
- disk (activations only): `STITCHSWEEP_CACHE_DIR` (default: `stitchsweep-cache` in the system's temporary
  folder), files written atomically and read back memory-mapped, so the workers of a node compute a
  representation once and share its pages. `STITCHSWEEP_CACHE_DISK_MB` (default 8192) bounds the folder:
  the least recently used files go first. An empty `STITCHSWEEP_CACHE_DIR` turns the disk level off.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.config.errors import SpecError

SWITCH_ENV = "STITCHSWEEP_CACHE"
BUDGET_ENV = "STITCHSWEEP_CACHE_MB"
DIR_ENV = "STITCHSWEEP_CACHE_DIR"
DISK_ENV = "STITCHSWEEP_CACHE_DISK_MB"
MB = 2**20


@dataclass
class Stats:
    hits: int = 0
    disk_hits: int = 0
    misses: int = 0
    too_large: int = 0
    evicted: int = 0


@dataclass
class Settings:
    enabled: bool
    budget: int  # bytes, memory level
    disk_dir: Path | None
    disk_budget: int  # bytes, disk level

    @classmethod
    def from_env(cls, env: dict | None = None) -> Settings:
        env = os.environ if env is None else env
        switch = env.get(SWITCH_ENV, "on").strip().lower()
        if switch not in ("on", "off"):
            raise SpecError(SWITCH_ENV, "'on' or 'off'", switch)
        raw_dir = env.get(DIR_ENV)
        disk_dir = Path(raw_dir) if raw_dir else None
        if raw_dir is None:  # default: node-local; "" turns the disk level off
            disk_dir = Path(tempfile.gettempdir()) / "stitchsweep-cache"
        return cls(switch == "on", _megabytes(env, BUDGET_ENV, 2048), disk_dir, _megabytes(env, DISK_ENV, 8192))


def _megabytes(env, name: str, default: int) -> int:
    raw = env.get(name, str(default))
    try:
        value = int(raw)
        if value < 0:
            raise ValueError
    except ValueError:
        raise SpecError(name, "a whole number of megabytes >= 0", raw) from None
    return value * MB


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


class WorkerCache:
    """The process's LRU (thread-safe: Tune runs a function trainable in a thread of its actor)."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings.from_env()
        self.stats = Stats()
        self._entries: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.RLock()
        self._writer: ThreadPoolExecutor | None = None  # `on_disk`'s files, one at a time, in order
        self._writes: list[Future] = []
        self.write_node = True  # whether `on_disk` writes the node's files (`configure`)

    @property
    def bytes(self) -> int:
        return self._bytes

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def get(self, key: tuple, compute: Callable[[], Any], *, disk: bool = False, device=None) -> Any:
        """The entry of `key`, computed by `compute()` on a miss. `disk=True` (a single tensor) also looks
        in, and writes to, the node's shared folder (a tensor read from there is moved to `device`)."""
        if not self.settings.enabled:
            return compute()
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.stats.hits += 1
                return self._entries[key][0]
        value = None
        path = self._disk_path(key) if disk else None
        if path is not None:
            value = _read_tensor(path)
            if value is not None:
                self.stats.disk_hits += 1
                value = value.to(device) if device is not None else value
        if value is None:
            self.stats.misses += 1
            value = compute()
            if path is not None:
                _write_tensor(path, value, self.settings.disk_budget)
        self._keep(key, value)
        return value

    def peek(self, key: tuple) -> Any:
        """The memory entry of `key` (counted as a hit), or None: nothing is computed."""
        with self._lock:
            if not self.settings.enabled or key not in self._entries:
                return None
            self._entries.move_to_end(key)
            self.stats.hits += 1
            return self._entries[key][0]

    def keep(self, key: tuple, value: Any) -> None:
        """Keep `value` as the memory entry of `key` (replacing one), within the budget; nothing when off."""
        if self.settings.enabled:
            self._keep(key, value)

    def on_disk(self, key: tuple, compute: Callable[[], Any], device=None) -> Any:
        """A tensor from the node's shared folder, computed and written there on a miss; not kept in memory
        (its caller keeps what it assembles from such pieces). The file is written by a background thread
        while the caller computes its next piece (the value must not change afterwards: cached values never
        do); `flush()` waits for the writes. With `write_node` False, files are read but none is written."""
        path = self._disk_path(key) if self.settings.enabled else None
        value = _read_tensor(path) if path is not None else None
        if value is not None:
            self.stats.disk_hits += 1
            return value.to(device) if device is not None else value
        self.stats.misses += 1
        value = compute()
        if path is not None and self.write_node:
            self._write_later(path, value)
        return value

    def store(self, key: tuple, value: Any) -> bool:
        """Write `value` (a tensor computed elsewhere, e.g. by the donor stage for later units) as the node's
        file of `key`, in the background as `on_disk` does, unless the file is there or no file is written
        (cache off, no disk level, `write_node` False). Whether a write began."""
        path = self._disk_path(key) if self.settings.enabled and self.write_node else None
        if path is None or path.exists():
            return False
        self._write_later(path, value)
        return True

    def _write_later(self, path: Path, value) -> None:
        with self._lock:
            if self._writer is None:
                self._writer = ThreadPoolExecutor(1, thread_name_prefix="cache-writer")
            self._writes.append(self._writer.submit(_write_tensor, path, value, self.settings.disk_budget))

    def flush(self) -> None:
        """Wait until every file `on_disk` began writing is written (or given up)."""
        with self._lock:
            writes, self._writes = self._writes, []
        for w in writes:
            w.result()

    def _keep(self, key: tuple, value: Any) -> None:
        size = nbytes(value)
        with self._lock:
            if size > self.settings.budget:
                self.stats.too_large += 1
                return
            old = self._entries.pop(key, None)
            self._bytes -= old[1] if old else 0
            while self._entries and self._bytes + size > self.settings.budget:
                _, (_, freed) = self._entries.popitem(last=False)
                self._bytes -= freed
                self.stats.evicted += 1
            self._entries[key] = (value, size)
            self._bytes += size

    def _disk_path(self, key: tuple) -> Path | None:
        if self.settings.disk_dir is None:
            return None
        digest = hashlib.sha256(repr(key).encode()).hexdigest()[:32]
        return self.settings.disk_dir / f"{digest}.pt"


def _read_tensor(path: Path):
    import torch

    try:
        value = torch.load(path, mmap=True, weights_only=True)
        os.utime(path)  # recently used: evicted last
        return value
    except Exception:  # absent, or torn by a writer that died, or unreadable: recompute
        return None


def _write_tensor(path: Path, value, disk_budget: int) -> None:
    """Write atomically (a temporary name, then a rename); a full disk or a folder this user cannot write
    only costs the sharing, never the unit. Oldest files are removed first to stay within `disk_budget`."""
    import torch

    size = nbytes(value)
    if size > disk_budget:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _make_room(path.parent, disk_budget - size)
        torch.save(value.detach().cpu() if value.device.type != "cpu" else value, tmp)
        os.replace(tmp, path)
    except Exception:  # torch.save raises RuntimeError, not OSError, for a path it cannot write
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass


def _make_room(folder: Path, budget: int) -> None:
    files = []
    for f in [*folder.glob("*.pt"), *folder.glob(".*.tmp")]:  # temporary files of writers that died count too
        try:
            st = f.stat()
        except OSError:
            continue
        files.append((st.st_mtime, st.st_size, f))
    total = sum(s for _, s, _ in files)
    for _, size, f in sorted(files):
        if total <= budget:
            break
        try:
            f.unlink()
            total -= size
        except OSError:
            pass


_CACHE: WorkerCache | None = None


def worker_cache() -> WorkerCache:
    """This process's cache, made from the environment on first use."""
    global _CACHE
    if _CACHE is None:
        _CACHE = WorkerCache()
    return _CACHE


def configure(env: dict | None = None, write_node: bool = True) -> WorkerCache:
    """Reset this process's settings from `env` (default: the environment); entries are kept when the
    settings are unchanged, so a worker that runs unit after unit keeps what it computed. `write_node`: whether
    the node's cache files are written (the backend's `Kind.shares_halves` of the stage); they are read
    either way."""
    global _CACHE
    settings = Settings.from_env(env)
    if _CACHE is None or _CACHE.settings != settings:
        _CACHE = WorkerCache(settings)
    _CACHE.write_node = write_node
    return _CACHE
