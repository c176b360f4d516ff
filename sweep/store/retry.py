"""An object store that errs for a moment: which of its errors are transient, and the store's own retry around
each whole operation (a write, a read, a listing, a delete, a rename), with exponential backoff and jitter.

pyarrow's S3 filesystem already retries each HTTP request: the filesystem of a URI (`FileSystem.from_uri`, pyarrow
26) for about 6 s (measured: 30 attempts of a request answered 503, then the error), a timed-out request included
(the client's timeout is about 3 s, 9 s for an upload, on Linux); `S3FileSystem()` built in Python, 3 attempts. A
URI cannot change either (`?retry_strategy=`, `?request_timeout=`, `?connect_timeout=` are refused). A store that
throttles for longer failed the operation, and with it the unit; a rename or a delete whose answer was lost
failed although it was done. `call` retries the whole operation while its error is transient:

- HTTP 5xx (InternalError, ServiceUnavailable, SlowDown, ...), 429 and S3's RequestTimeout, and a connection that
  was made and then timed out, dropped or reset mid-request (curl codes 18, 28, 52, 55, 56);
- never a 4xx (NoSuchKey, NoSuchBucket, AccessDenied, ...), a missing file, a full disk, or an endpoint that
  cannot be reached at all (connection refused, a host that does not resolve, a connect timeout: a wrong
  `--storage` is refused in seconds, as before).

A retried operation must be idempotent: the callers in `sweep.store.storage` make it so (a write is one whole
object, sent again; a delete or a rename that a lost answer hid is done when the retry finds it done).
`STITCHSWEEP_STORE_RETRIES` (default 6) retries at most, the n-th after a wait drawn uniformly from
[0, min(30 s, `STITCHSWEEP_STORE_BACKOFF` x 2^(n-1))] (default 0.5 s: at most 31.5 s of waits in all); then
`StoreUnavailable`.
"""

from __future__ import annotations

import errno
import logging
import os
import random
import re
import time
from collections.abc import Callable
from typing import TypeVar

RETRIES_ENV = "STITCHSWEEP_STORE_RETRIES"
BACKOFF_ENV = "STITCHSWEEP_STORE_BACKOFF"
RETRIES = 6
BACKOFF_S = 0.5
BACKOFF_CAP_S = 30.0

log = logging.getLogger(__name__)
T = TypeVar("T")

# The AWS SDK's names of S3's retryable errors (pyarrow: "AWS Error SLOW_DOWN during PutObject operation: ..."),
# or an error it could not name whose HTTP status is 5xx or 429 ("AWS Error UNKNOWN (HTTP status 503) during
# HeadObject operation": a HEAD has no body to name it).
_AWS_NAMED = re.compile(r"AWS Error (INTERNAL_FAILURE|SERVICE_UNAVAILABLE|SLOW_DOWN|THROTTLING|REQUEST_TIMEOUT)\b")
_AWS_STATUS = re.compile(r"AWS Error \w+ \(HTTP status (5\d\d|429)\)")
# A connection the server accepted that then timed out (28, but not a connect timeout), gave nothing back (52),
# or broke while sending (55) or receiving (56), or a body cut short (18).
_CURL = re.compile(r"AWS Error NETWORK_CONNECTION\b.*\bcurlCode: (18|28|52|55|56)\b")
_UNREACHABLE = re.compile(
    r"Connection timed out after|Resolving timed out|Could not resolve|Could not connect|Couldn't connect"
    r"|Failed to connect"
)
_FULL = {errno.ENOSPC, errno.EDQUOT}


class StoreUnavailable(OSError):
    """An object store that kept answering an operation with transient errors (`transient`) for every attempt
    `call` made: the store's fault, for now, not the data's. Nothing was read as a result or half-written; the
    sweep is resumable once the store answers again."""

    def __init__(self, where: str, attempts: int, seconds: float, last: BaseException) -> None:
        first = str(last).splitlines()[0] if str(last) else type(last).__name__
        super().__init__(
            f"{where}: expected the object store to answer, found it failing {attempts} time(s) over {seconds:.1f} s"
            f" ({first}); `{RETRIES_ENV}` sets how many retries"
        )
        self.where, self.attempts = where, attempts

    def __reduce__(self):  # picklable: a Ray worker's reaches the driver
        return _rebuilt, (type(self), self.args, self.where, self.attempts)


def _rebuilt(cls, args, where, attempts):
    exc = OSError.__new__(cls)
    OSError.__init__(exc, *args)
    exc.where, exc.attempts = where, attempts
    return exc


def transient(exc: BaseException) -> bool:
    """Whether `exc` is an object store's error worth another attempt of the same operation (module doc)."""
    if not isinstance(exc, OSError) or isinstance(exc, (FileNotFoundError, PermissionError, StoreUnavailable)):
        return False
    if exc.errno in _FULL:
        return False
    text = str(exc)
    if _AWS_NAMED.search(text) or _AWS_STATUS.search(text):
        return True
    return bool(_CURL.search(text)) and not _UNREACHABLE.search(text)


def settings() -> tuple[int, float]:
    """(retries, first backoff in seconds) from `STITCHSWEEP_STORE_RETRIES` and `STITCHSWEEP_STORE_BACKOFF`."""
    return (
        _number(RETRIES_ENV, RETRIES, int, "a whole number of retries, 0 or more"),
        _number(BACKOFF_ENV, BACKOFF_S, float, "a number of seconds, 0 or more"),
    )


def _number(name: str, default, kind, expected: str):
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{name}: expected {expected}, found {raw!r}")
    return value


def backoff(retry: int, base: float) -> float:
    """The wait before retry number `retry` (0 for the first): full jitter over an exponential cap."""
    return random.uniform(0, min(BACKOFF_CAP_S, base * 2**retry))


def call(op: Callable[[int], T], where: str) -> T:
    """`op(attempt)` (0 first), again while it raises a transient error (`transient`), waiting `backoff` between
    attempts; `StoreUnavailable` (from the last error) once the retries are spent. `op` sees which attempt it is,
    so that a retry can tell an earlier attempt's lost success (a rename already done) from work still to do."""
    retries, base = settings()
    start = time.monotonic()
    for attempt in range(retries + 1):
        try:
            return op(attempt)
        except Exception as exc:
            if not transient(exc):
                raise
            if attempt == retries:
                raise StoreUnavailable(where, attempt + 1, time.monotonic() - start, exc) from exc
            wait = backoff(attempt, base)
            log.info("%s: transient error, retry %d of %d in %.2f s: %s", where, attempt + 1, retries, wait, exc)
            time.sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover
