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
- disk (activations only): `STITCHSWEEP_CACHE_DIR` (default: `stitchsweep-cache-<uid>` in `$TMPDIR` or the
  system's temporary folder, made owner-only), files written atomically and read back memory-mapped, so the
  workers of a node compute a representation once and share its pages. Each file holds its full key, compared
  on read: a planted, stale or torn file is computed again. `STITCHSWEEP_CACHE_DISK_MB` (default 8192) bounds
  the folder, least recently used files first; an empty `STITCHSWEEP_CACHE_DIR` turns the level off. Another
  user's folder or one group or others can write is refused (`check_folder`; the driver stops in one line, a
  worker leaves its disk level off) unless `STITCHSWEEP_CACHE_SHARED=1`.
- records: with `STITCHSWEEP_CACHE_RECORD` (a sweep's folder: `record_in`), each process lists the files it
  read or wrote in `<sweep>/_cache_keys/<host>-<pid>-<token>.json`, its own (`du`, `prune --cache`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import stat
import sys
import tempfile
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.config.errors import SpecError
from sweep.store.layout import RECORD_DIR  # under a sweep folder: a JSON file per process using the node folder
from sweep.worker.cache_files import nbytes  # noqa: F401  (re-exported)
from sweep.worker.cache_files import read_tensor as _read_tensor
from sweep.worker.cache_files import write_tensor as _write_tensor

SWITCH_ENV = "STITCHSWEEP_CACHE"
BUDGET_ENV = "STITCHSWEEP_CACHE_MB"
DIR_ENV = "STITCHSWEEP_CACHE_DIR"
DISK_ENV = "STITCHSWEEP_CACHE_DISK_MB"
SHARED_ENV = "STITCHSWEEP_CACHE_SHARED"
RECORD_ENV = "STITCHSWEEP_CACHE_RECORD"
MB = 2**20
DEFAULT_MB = 2048  # the memory level's budget unless `STITCHSWEEP_CACHE_MB` says
_HOST = "".join(c if c.isalnum() or c in "-." else "_" for c in socket.gethostname()) or "host"  # in names


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
    record: str | None = None  # the sweep folder (local path or URI) whose `RECORD_DIR` lists the files used

    @classmethod
    def from_env(cls, env: dict | None = None) -> Settings:
        """The settings of `env` (default: the environment); a bad variable, or a cache folder `check_folder`
        refuses, is a SpecError naming it."""
        env = os.environ if env is None else env
        switch = env.get(SWITCH_ENV, "on").strip().lower()
        if switch not in ("on", "off"):
            raise SpecError(SWITCH_ENV, "'on' or 'off'", switch)
        if (shared := env.get(SHARED_ENV, "0").strip() or "0") not in ("0", "1"):
            raise SpecError(SHARED_ENV, "'1' (a cache folder shared on purpose) or '0'", shared)
        raw_dir = env.get(DIR_ENV)  # default: node-local, the user's own; "" turns the disk level off
        disk_dir = default_folder() if raw_dir is None else Path(raw_dir) if raw_dir else None
        if disk_dir is not None:
            check_folder(disk_dir, shared == "1", create=switch == "on")
        budgets = _megabytes(env, BUDGET_ENV, DEFAULT_MB), _megabytes(env, DISK_ENV, 8192)
        return cls(switch == "on", budgets[0], disk_dir, budgets[1], env.get(RECORD_ENV) or None)


def default_folder() -> Path:
    """`stitchsweep-cache-<uid>` in `$TMPDIR` or the system's temporary folder: one per user and node."""
    user = os.getuid() if hasattr(os, "getuid") else os.getlogin()
    return Path(tempfile.gettempdir()) / f"stitchsweep-cache-{user}"


def check_folder(folder: Path, shared: bool = False, create: bool = True) -> None:
    """Create `folder` owner-only (0700) when absent (with `create`); refuse it (a SpecError naming it and
    `STITCHSWEEP_CACHE_DIR`) when it or a link at its name is another user's, or group or others can write it,
    unless `shared`. A folder that cannot be made or reached is let be: nothing is written or read there."""
    if create and not os.path.lexists(folder):
        with contextlib.suppress(OSError):  # a file in the way, no permission, or made meanwhile (checked below)
            folder.mkdir(mode=0o700, parents=True)
    try:
        link, st = os.lstat(folder), os.stat(folder)
    except OSError:
        return
    if shared or not hasattr(os, "getuid"):
        return
    uid, owners = os.getuid(), {link.st_uid, st.st_uid} - {os.getuid()}
    found = [f"owned by uid {min(owners)}"] if owners else []
    if stat.S_ISDIR(st.st_mode) and st.st_mode & 0o022:
        found.append(f"mode {stat.S_IMODE(st.st_mode):04o}, writable by group or others")
    if found:
        expected = f"a cache folder this user (uid {uid}) owns and only it can write (set {DIR_ENV} to one"
        raise SpecError(
            DIR_ENV, f"{expected}, or {SHARED_ENV}=1 for a folder shared on purpose)", f"{folder}: {', '.join(found)}"
        )


def record_in(sweep_dir) -> None:
    """The driver's: every worker of the run lists the node's files its units use in the sweep's `RECORD_DIR`
    (the variable reaches them with the other `STITCHSWEEP_CACHE*` settings: `backends.stage.worker_env`)."""
    os.environ[RECORD_ENV] = sweep_dir.path.path if sweep_dir.path.is_local else sweep_dir.uri


def _lenient(env: dict | None) -> Settings:
    """A worker's settings: a refused folder turns its disk level off, with a note on stderr (once per line),
    instead of failing the unit (the driver refused it already where it resolves the same settings)."""
    try:
        return Settings.from_env(env)
    except SpecError as exc:
        if exc.field != DIR_ENV:
            raise
        if str(exc) not in _NOTED:
            _NOTED.add(str(exc))
            print(f"note: the node's cache folder is not used: {exc}", file=sys.stderr)
        return Settings.from_env({**(os.environ if env is None else env), DIR_ENV: ""})


_NOTED: set[str] = set()


def cache_on(env: dict | None = None) -> bool:
    """Whether the worker cache is on under `env` (default: the environment): `STITCHSWEEP_CACHE` is not "off"."""
    return (os.environ if env is None else env).get(SWITCH_ENV, "on").strip().lower() != "off"


def memory_budget(env: dict | None = None) -> int:
    """The memory level's budget in bytes under `env` (default: the environment; 0 with the cache off): what
    planning bounds a unit's kept activations by. A bad variable is a SpecError naming it."""
    env = os.environ if env is None else env
    return _megabytes(env, BUDGET_ENV, DEFAULT_MB) if cache_on(env) else 0


def _megabytes(env, name: str, default: int) -> int:
    if not str(raw := env.get(name, str(default))).strip().isdigit():
        raise SpecError(name, "a whole number of megabytes >= 0", raw)
    return int(raw) * MB


class WorkerCache:
    """The process's LRU (thread-safe: Tune runs a function trainable in a thread of its actor)."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or _lenient(None)
        self.stats = Stats()
        self._entries: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.RLock()
        self._writer: ThreadPoolExecutor | None = None  # `on_disk`'s files, one at a time, in order
        self._writes: list[Future] = []
        self.write_node = True  # whether `on_disk` writes the node's files (`configure`)
        self._used: set[str] = set()  # names of the node's files read or written, `_recorded` of them recorded
        self._recorded = 0
        self._record_name = f"{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:8]}.json"

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
        entry = self._disk_entry(key) if disk else None
        value = self._read(entry) if entry is not None else None
        if value is not None:
            self.stats.disk_hits += 1
            value = value.to(device) if device is not None else value
        else:
            self.stats.misses += 1
            value = compute()
            if entry is not None:
                self._use(entry[0])
                _write_tensor(entry, value, self.settings.disk_budget)
        if entry is not None:
            self._write_record()
        self._keep(key, value)
        return value

    def let_go(self, keep: Callable[[tuple], bool]) -> int:
        """Drop every memory entry whose key `keep` refuses (the node's files stay: a later unit that reads one
        reads it from there). The bytes dropped."""
        with self._lock:
            gone = [k for k in self._entries if not keep(k)]
            dropped = sum(self._entries[k][1] for k in gone)
            for k in gone:
                del self._entries[k]
            self._bytes -= dropped
        return dropped

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
        entry = self._disk_entry(key) if self.settings.enabled else None
        value = self._read(entry) if entry is not None else None
        if value is not None:
            self.stats.disk_hits += 1
            return value.to(device) if device is not None else value
        self.stats.misses += 1
        value = compute()
        if entry is not None and self.write_node:
            self._write_later(entry, value)
        return value

    def store(self, key: tuple, value: Any) -> bool:
        """Write `value` (a tensor computed elsewhere, e.g. by the donor stage for later units) as the node's
        file of `key`, in the background as `on_disk` does, unless the file is there or no file is written
        (cache off, no disk level, `write_node` False). Whether a write began."""
        entry = self._disk_entry(key) if self.settings.enabled and self.write_node else None
        if entry is None or entry[0].exists():
            return entry is not None and self._use(entry[0], False)  # a later unit of this sweep reads it
        self._write_later(entry, value)
        return True

    def _write_later(self, entry: tuple[Path, str], value) -> None:
        self._use(entry[0])
        with self._lock:
            if self._writer is None:
                self._writer = ThreadPoolExecutor(1, thread_name_prefix="cache-writer")
            self._writes.append(self._writer.submit(_write_tensor, entry, value, self.settings.disk_budget))

    def flush(self) -> None:
        """Wait until every file `on_disk` began writing is written (or given up); then bring this process's
        record of the files it used up to date."""
        with self._lock:
            writes, self._writes = self._writes, []
        for w in writes:
            w.result()
        self._write_record()

    def _read(self, entry: tuple[Path, str]):
        value = _read_tensor(*entry)
        return None if value is None else self._use(entry[0], value)

    def _use(self, path: Path, passed: Any = None) -> Any:
        """Note that this process used the node's file at `path` (`_write_record`); returns `passed`."""
        with self._lock:
            self._used.add(path.name)
        return passed

    def _write_record(self) -> None:
        """Rewrite this process's record (`RECORD_DIR`) when it used files it does not list yet (a failed write
        costs `du`'s and `prune`'s attribution only, never the unit)."""
        from sweep.store.storage import open_root

        with self._lock:
            if self.settings.record is None or len(self._used) == self._recorded:
                return
            names = sorted(self._used)
        doc = {"host": _HOST, "pid": os.getpid(), "folder": str(self.settings.disk_dir), "files": names}
        try:
            (open_root(self.settings.record) / RECORD_DIR / self._record_name).write_text(json.dumps(doc))
            self._recorded = max(self._recorded, len(names))
        except Exception:  # pyarrow raises OSError, ArrowInvalid, ...
            pass

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

    def _disk_entry(self, key: tuple) -> tuple[Path, str] | None:
        """The node's file of `key` and the full key it must hold (its name is a hash of it)."""
        text = repr(key)
        name = f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.pt"
        return None if self.settings.disk_dir is None else (self.settings.disk_dir / name, text)


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
    settings = _lenient(env)
    if _CACHE is None or _CACHE.settings != settings:
        _CACHE = WorkerCache(settings)
    _CACHE.write_node = write_node
    return _CACHE
