"""Where results live: a local folder, or any `pyarrow.fs` URI (`s3://bucket/prefix`, `gs://bucket/prefix`,
`hdfs://...`, `file:///...`). One job: name files under a storage root and move bytes in and out of them.

`Loc` is a small, path-like handle (filesystem + path) with the few operations the sweep and the reader need.
Writes are atomic from a reader's point of view, whatever the filesystem:

- local folders (and NFS/EFS mounts): write a `.tmp-*` sibling, then rename it onto the target;
- object stores (S3, GCS): the whole body is serialised in memory first and sent as one object upload, which
  the store makes visible all at once or not at all (a writer that dies mid-upload leaves nothing);
- any other pyarrow filesystem (HDFS, ...): write a `.tmp-*` sibling, then `move` it.

A write that finds no room (ENOSPC; EDQUOT, a quota) removes its temporary file and raises `DiskFull`, naming
the folder and the bytes it needed: the machine's fault, not a unit's (`sweep.kinds.base` raises it past the
unit's record, the driver stops the run). Parquet files are written with checksums and verified when read
(`sweep.store.checksum`).

On any filesystem but a local one, each whole operation (a write, a read, a listing, a delete, a rename) is
retried while the store answers with a transient error (503 SlowDown, 500, a timed-out request), with exponential
backoff and jitter, then `StoreUnavailable` (`sweep.store.retry`, `STITCHSWEEP_STORE_RETRIES`). Each is
idempotent: a write sends the whole object again; a delete or a rename (on S3 a copy then a delete) whose answer
was lost is done when its retry finds the file gone (and, for a rename, the target there).

Credentials and endpoints come from the filesystem's usual sources (for S3: `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_ENDPOINT_URL`, instance roles, ...) or from pyarrow's URI query options
(`s3://bucket/prefix?endpoint_override=host:port&scheme=http`). Query options are never printed: a `Loc`
shows itself as `scheme://path`.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import posixpath
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from sweep.store import retry
from sweep.store.checksum import parquet_bytes, verified

TMP_PREFIX = ".tmp-"
OBJECT_STORES = {"s3", "gcs"}
_SCHEME = {"s3": "s3", "gcs": "gs", "hadoop": "hdfs"}


class StorageError(ValueError):
    """A storage root that cannot be opened (unknown scheme, malformed URI, missing filesystem support)."""


FULL = {errno.ENOSPC, errno.EDQUOT}  # the errors of a write that found no room


class DiskFull(OSError):
    """A write that found no room in `folder` for its `needed` bytes (None: a write the error does not size).
    Picklable with its fields: a Ray worker's raises it to the driver."""

    def __init__(self, folder: str, needed: int | None, code: int = errno.ENOSPC) -> None:
        super().__init__(code, os.strerror(code), folder)
        self.folder, self.needed = folder, needed

    def __reduce__(self):
        return type(self), (self.folder, self.needed, self.errno)

    def __str__(self) -> str:
        size = f"{self.needed:,} bytes" if self.needed is not None else "its file"
        full = "its quota reached" if self.errno == errno.EDQUOT else "the disk full"
        return f"{self.folder}: expected room to write {size}, found {full} ({self.strerror})"


def disk_full_in(exc: BaseException | None) -> DiskFull | None:
    """The `DiskFull` that `exc` is or was raised from (its `__cause__` / `__context__` chain; a Ray task error's
    `cause`), or one for a plain OSError of a full disk (ENOSPC, EDQUOT: a write outside the store's); None
    when there is neither."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        cause = getattr(exc, "cause", None)  # Ray's RayTaskError: the exception the task raised
        if isinstance(cause, BaseException) and cause is not exc:
            exc = cause
            continue
        if isinstance(exc, DiskFull):
            return exc
        if isinstance(exc, OSError) and exc.errno in FULL:
            where = posixpath.dirname(str(exc.filename)) if exc.filename else "a folder the error does not name"
            return DiskFull(where, None, exc.errno)
        exc = exc.__cause__ or exc.__context__
    return None


def is_uri(root: str | os.PathLike) -> bool:
    return isinstance(root, str) and "://" in root


def open_root(root: str | os.PathLike | Loc) -> Loc:
    """A `Loc` for a local path or a pyarrow.fs URI. Raises StorageError naming the URI when it cannot be used."""
    if isinstance(root, Loc):
        return root
    if not is_uri(root):
        return Loc(pafs.LocalFileSystem(), Path(root).absolute().as_posix())
    try:
        fs, path = pafs.FileSystem.from_uri(root)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, ValueError) as exc:
        raise StorageError(f"cannot open storage {_strip_query(str(root))}: {exc}") from None
    return Loc(fs, path.rstrip("/"))


def _strip_query(uri: str) -> str:
    return uri.split("?", 1)[0]


def child_uri(root: str, name: str) -> str:
    """`root` joined with `name`, keeping a URI's query options (what a user types to reach the child)."""
    if not is_uri(root):
        return str(Path(root).absolute() / name)
    base, sep, query = root.partition("?")
    return f"{base.rstrip('/')}/{name}{sep}{query}"


class Loc:
    """One file or folder on one filesystem. Immutable; joins with `/` like pathlib."""

    __slots__ = ("fs", "path")

    def __init__(self, fs: pafs.FileSystem, path: str) -> None:
        self.fs = fs
        self.path = path

    # naming ---------------------------------------------------------------------------------------------
    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    @property
    def is_object_store(self) -> bool:
        return self.fs.type_name in OBJECT_STORES

    def __truediv__(self, name: str) -> Loc:
        return Loc(self.fs, posixpath.join(self.path, str(name)))

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)

    @property
    def parent(self) -> Loc:
        return Loc(self.fs, posixpath.dirname(self.path))

    def with_name(self, name: str) -> Loc:
        return self.parent / name

    def __fspath__(self) -> str:
        if not self.is_local:
            raise TypeError(f"{self} is not a local path")
        return self.path

    def __str__(self) -> str:
        if self.is_local:
            return self.path
        return f"{_SCHEME.get(self.fs.type_name, self.fs.type_name)}://{self.path}"

    def __repr__(self) -> str:
        return f"Loc({str(self)!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Loc) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def _retried(self, op):
        """`op(attempt)` once on a local folder; elsewhere again while the store errs transiently (`retry.call`)."""
        return op(0) if self.is_local else retry.call(op, str(self))

    # queries --------------------------------------------------------------------------------------------
    def _type(self) -> pafs.FileType:
        return self._retried(lambda _: self._raw_type())

    def _raw_type(self) -> pafs.FileType:
        return self.fs.get_file_info(self.path).type

    def exists(self) -> bool:
        return self._type() != pafs.FileType.NotFound

    def is_file(self) -> bool:
        return self._type() == pafs.FileType.File

    def is_dir(self) -> bool:
        return self._type() == pafs.FileType.Directory

    def _children(self, recursive: bool = False) -> list[pafs.FileInfo]:
        sel = pafs.FileSelector(self.path, allow_not_found=True, recursive=recursive)
        try:
            return self._retried(lambda _: self.fs.get_file_info(sel))
        except (NotADirectoryError, FileNotFoundError):
            return []

    def file_stamps(self, suffix: str) -> dict[str, tuple[int, int]]:
        """Direct child files ending in `suffix` (hidden ones left out) -> (size, modification time in ns):
        what one listing request tells of each, without reading it."""
        return {
            i.path: (int(i.size or 0), int(i.mtime_ns or 0))
            for i in self._children()
            if i.type == pafs.FileType.File and i.base_name.endswith(suffix) and not i.base_name.startswith(".")
        }

    def glob(self, pattern: str) -> list[Loc]:
        """Direct children whose name matches `pattern` (fnmatch), sorted by name."""
        return sorted(
            (Loc(self.fs, i.path) for i in self._children() if fnmatch.fnmatch(i.base_name, pattern)),
            key=lambda loc: loc.path,
        )

    def rglob(self, pattern: str) -> list[Loc]:
        """Files anywhere below whose name matches `pattern`."""
        return sorted(
            (
                Loc(self.fs, i.path)
                for i in self._children(recursive=True)
                if i.type == pafs.FileType.File and fnmatch.fnmatch(i.base_name, pattern)
            ),
            key=lambda loc: loc.path,
        )

    def files(self, suffix: str) -> list[Loc]:
        """Direct child files ending in `suffix`, hidden ones (".tmp-*", ...) left out, sorted by name."""
        return sorted(
            (
                Loc(self.fs, i.path)
                for i in self._children()
                if i.type == pafs.FileType.File and i.base_name.endswith(suffix) and not i.base_name.startswith(".")
            ),
            key=lambda loc: loc.path,
        )

    # reading --------------------------------------------------------------------------------------------
    def read_bytes(self) -> bytes:
        def read(_):
            with self.fs.open_input_stream(self.path) as fh:
                return fh.read()

        return self._retried(read)

    def read_text(self) -> str:
        return self.read_bytes().decode()

    def parquet_file(self) -> pq.ParquetFile:
        """One Parquet file, read whole (one request on an object store) and its checksum verified: raises
        `ChecksumError` when its bytes changed after they were written (`sweep.store.checksum`)."""
        return verified(self.read_bytes(), str(self))

    def read_parquet(self, columns: list[str] | None = None) -> pa.Table:
        """One Parquet file, verified (`parquet_file`; no dataset discovery: about twice as fast as
        `pq.read_table` for small parts)."""
        return self.parquet_file().read(columns=columns)

    # writing --------------------------------------------------------------------------------------------
    def mkdir(self, parents: bool = True, exist_ok: bool = True) -> None:
        self._retried(lambda _: self.fs.create_dir(self.path, recursive=True))

    def write_bytes(self, data: bytes) -> None:
        """Replace the file with `data`, atomically from a reader's point of view (see the module doc). No room
        for it: `DiskFull` (naming the folder and `len(data)`), and no temporary file left."""
        try:
            self._retried(lambda _: self._write_whole(data))  # a whole object, sent again: idempotent
        except OSError as exc:
            if exc.errno in FULL and not isinstance(exc, DiskFull):
                raise DiskFull(str(self.parent), len(data), exc.errno) from exc
            raise

    def _write_whole(self, data: bytes) -> None:
        if self.is_object_store:
            self._stream(self.path, data)  # one upload; visible only once complete
            return
        self.parent.mkdir()
        tmp = self.with_name(f"{TMP_PREFIX}{self.name}.{uuid.uuid4().hex[:8]}")
        try:
            self._stream(tmp.path, data)
            if self.is_local:
                os.replace(tmp.path, self.path)
            else:
                self.fs.move(tmp.path, self.path)
        finally:
            tmp.unlink(missing_ok=True)

    def _stream(self, path: str, data: bytes) -> None:
        with self.fs.open_output_stream(path) as fh:
            fh.write(data)

    def write_text(self, text: str) -> None:
        self.write_bytes(text.encode())

    def write_parquet(self, table: pa.Table) -> None:
        """`table` as one Parquet file with its checksums (`sweep.store.checksum`), written as `write_bytes` does."""
        self.write_bytes(parquet_bytes(table))

    def unlink(self, missing_ok: bool = False) -> None:
        def delete(attempt: int) -> None:
            try:
                self.fs.delete_file(self.path)
            except FileNotFoundError:
                if not (missing_ok or attempt):  # a retry that finds it gone: the lost answer's delete was done
                    raise

        self._retried(delete)

    def rename(self, target: Loc) -> Loc:
        """Move onto `target` (replacing it). On object stores this is a copy then a delete: a retry that finds
        the source gone and the target there is done (the attempt before it landed, its answer lost)."""
        if self.is_local:
            os.replace(self.path, target.path)
            return target

        def move(attempt: int) -> None:
            if attempt and self._raw_type() == pafs.FileType.NotFound and target._raw_type() != pafs.FileType.NotFound:
                return
            self.fs.move(self.path, target.path)

        self._retried(move)
        return target

    def delete_tree(self) -> None:
        """Delete this folder and everything below it (nothing if it does not exist)."""

        def delete(_) -> None:
            if self._raw_type() != pafs.FileType.NotFound:  # a retry after a partial delete deletes the rest
                self.fs.delete_dir(self.path)

        self._retried(delete)
