"""Which errors of an object store are transient, and the store's retry around a whole operation (`sweep.store.
retry`): with growing, jittered waits; never for a missing file, a refusal or a full disk; then one error naming
the location. The messages are pyarrow's own, as it raised them against moto's server through an erring proxy
(tests/sweep/store/erring_s3.py) and against a port where nothing listens."""

from __future__ import annotations

import errno
import pickle

import pytest

from sweep.store import retry
from sweep.store.retry import BACKOFF_ENV, RETRIES_ENV, StoreUnavailable, call, transient
from sweep.store.storage import DiskFull

TRANSIENT = [
    "When getting information for key 'x' in bucket 'b': AWS Error UNKNOWN (HTTP status 503) during HeadObject"
    " operation: No response body.",
    "When reading information for key 'x' in bucket 'b': AWS Error UNKNOWN (HTTP status 500) during HeadObject"
    " operation: No response body.",
    "When listing objects under key '' in bucket 'b': AWS Error SERVICE_UNAVAILABLE during ListObjectsV2 operation:"
    " Service is unable to handle request. (Request ID: bf117a8820894a6e)",
    "When initiating multiple part upload for key 'x' in bucket 'b': AWS Error SLOW_DOWN during"
    " CreateMultipartUpload operation: Please reduce your request rate. (Request ID: f1b54a0470434c6c)",
    "When copying key 'x' in bucket 'b' to key 'y' in bucket 'b': AWS Error INTERNAL_FAILURE during CopyObject"
    " operation: We encountered an internal error. Please try again. (Request ID: 30efff5cfa734c10)",
    "When uploading part for key 't' in bucket 'b': AWS Error NETWORK_CONNECTION during UploadPart operation:"
    " curlCode: 28, Timeout was reached; Details: Operation too slow. Less than 1 bytes/sec transferred the last"
    " 3 seconds",
    "AWS Error UNKNOWN (HTTP status 429) during PutObject operation: Too Many Requests",
    "AWS Error NETWORK_CONNECTION during GetObject operation: curlCode: 56, Failure when receiving data from the peer",
]
NOT_TRANSIENT = [
    "When initiating multiple part upload for key 'x' in bucket 'nobkt': AWS Error NO_SUCH_BUCKET during"
    " CreateMultipartUpload operation: The specified bucket does not exist (Request ID: wPUVoNp342kQiB7axchd)",
    "AWS Error UNKNOWN (HTTP status 400) during CreateBucket operation: Unable to parse ExceptionName:"
    " InvalidBucketName Message: The specified bucket is not valid.",
    "AWS Error ACCESS_DENIED during PutObject operation: Access Denied",
    "AWS Error UNKNOWN (HTTP status 403) during HeadObject operation: No response body.",
    "AWS Error NO_SUCH_UPLOAD during CompleteMultipartUpload operation: The specified upload does not exist.",
    "When getting information for key 'x' in bucket 'b': AWS Error NETWORK_CONNECTION during HeadObject operation:"
    " curlCode: 7, Could not connect to server; Details: Failed to connect to 127.0.0.1:9 after 0 ms: Could not"
    " connect to server",  # nothing listens: a wrong --storage, refused at once
    "AWS Error NETWORK_CONNECTION during HeadObject operation: curlCode: 28, Timeout was reached; Details:"
    " Connection timed out after 1001 milliseconds",  # a connect timeout: nothing answers there
    "When getting information for key 'x' in bucket 'b': AWS Error NETWORK_CONNECTION during HeadObject operation:"
    " curlCode: 6, Could not resolve hostname; Details: Could not resolve host: no-such-host.invalid",
    "Error writing bytes to file. Detail: [errno 5] Input/output error",
]


def test_transient_errors_are_told_from_the_others():
    assert [m for m in TRANSIENT if not transient(OSError(m))] == []
    assert [m for m in NOT_TRANSIENT if transient(OSError(m))] == []
    slow_down = TRANSIENT[3]
    assert not transient(FileNotFoundError(slow_down)) and not transient(PermissionError(slow_down))
    assert not transient(DiskFull("s3://b/t", 10)) and not transient(OSError(errno.ENOSPC, slow_down))
    assert not transient(ValueError(slow_down))  # not an I/O error: pyarrow raises OSError for the store's
    assert not transient(StoreUnavailable("s3://b/x", 7, 1.0, OSError(slow_down)))  # spent: not again


@pytest.fixture
def waits(monkeypatch):
    got: list[float] = []
    monkeypatch.setattr(retry.time, "sleep", got.append)
    return got


def _failing(times: int, message: str = TRANSIENT[3]):
    seen: list[int] = []

    def op(attempt: int) -> str:
        seen.append(attempt)
        if len(seen) <= times:
            raise OSError(message)
        return "done"

    return op, seen


def test_an_operation_is_retried_with_growing_jittered_waits(waits, monkeypatch):
    monkeypatch.setenv(RETRIES_ENV, "6")
    monkeypatch.setenv(BACKOFF_ENV, "0.5")
    op, seen = _failing(5)
    assert call(op, "s3://b/x") == "done" and seen == [0, 1, 2, 3, 4, 5]
    assert len(waits) == 5 and all(0 <= w <= 0.5 * 2**i for i, w in enumerate(waits))
    many = [retry.backoff(4, 0.5) for _ in range(200)]
    assert max(many) <= 8.0 and max(many) > 4.0 and min(many) < 4.0  # jitter over the whole range
    assert max(retry.backoff(20, 0.5) for _ in range(50)) <= retry.BACKOFF_CAP_S


def test_spent_retries_raise_one_error_naming_the_location_and_the_last_error(waits, monkeypatch):
    monkeypatch.setenv(RETRIES_ENV, "2")
    op, seen = _failing(10)
    with pytest.raises(StoreUnavailable) as got:
        call(op, "s3://b/s/trials/t0.parquet")
    assert seen == [0, 1, 2] and len(waits) == 2
    text = str(got.value)
    assert text.startswith("s3://b/s/trials/t0.parquet: expected the object store to answer, found it failing 3")
    assert "SLOW_DOWN" in text and RETRIES_ENV in text and isinstance(got.value.__cause__, OSError)
    back = pickle.loads(pickle.dumps(got.value))  # a Ray worker's reaches the driver whole
    assert type(back) is StoreUnavailable and str(back) == text and back.attempts == 3


def test_other_errors_are_raised_at_once(waits):
    for exc in (FileNotFoundError("s3://b/x"), OSError(NOT_TRANSIENT[0]), DiskFull("/r/t", 5), KeyError("x")):

        def op(attempt: int, exc=exc):
            raise exc

        with pytest.raises(type(exc)):
            call(op, "s3://b/x")
    assert waits == []


def test_no_retries_and_a_wrong_setting(waits, monkeypatch):
    monkeypatch.setenv(RETRIES_ENV, "0")
    op, seen = _failing(1)
    with pytest.raises(StoreUnavailable, match="failing 1 time"):
        call(op, "s3://b/x")
    assert seen == [0] and waits == []
    for name, raw in ((RETRIES_ENV, "many"), (RETRIES_ENV, "-1"), (BACKOFF_ENV, "soon")):
        monkeypatch.setenv(name, raw)
        with pytest.raises(ValueError, match=f"^{name}: expected .* found '{raw}'"):
            retry.settings()
        monkeypatch.delenv(name)
    assert retry.settings() == (retry.RETRIES, retry.BACKOFF_S)
