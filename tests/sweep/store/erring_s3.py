"""An object store that errs: an HTTP proxy on 127.0.0.1 in front of an S3 server (moto's), used as the
`endpoint_override` of a storage URI. Seeded, it answers a share of the requests with S3's own transient errors
(500 InternalError, 503 SlowDown, 503 ServiceUnavailable, with S3's XML bodies) without forwarding them, and on
request it answers a burst of requests 503 SlowDown (longer than pyarrow's own retries), holds the answer of one
request past the client's timeout (the request forwarded: it landed, the client did not hear so) or forwards
requests and then answers 500 (they landed, the client was told they failed).
Every request is logged with what it was answered, in order."""

from __future__ import annotations

import http.client
import http.server
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import pytest

from sweep.store.retry import BACKOFF_ENV

ERRORS = [
    (500, "InternalError", "We encountered an internal error. Please try again."),
    (503, "SlowDown", "Please reduce your request rate."),
    (503, "ServiceUnavailable", "Service is unable to handle request."),
]
HOP = {"transfer-encoding", "connection", "expect", "keep-alive"}  # not forwarded as they came


@dataclass
class Request:
    method: str
    key: str  # "bucket/key", unquoted
    query: str
    fault: str | None = None  # "SlowDown", ..., "held", "landed-then-500"; None: forwarded and answered
    upstream: int = 0  # the S3 server's answer (0: not forwarded)

    @property
    def ok(self) -> bool:
        """Whether the client was told it succeeded."""
        return self.fault is None and 200 <= self.upstream < 300

    @property
    def landed(self) -> bool:
        """Whether the S3 server carried it out with success (whatever the client heard)."""
        return 200 <= self.upstream < 300


Match = Callable[[Request], bool]


class ErringS3:
    def __init__(self, upstream: str, rate: float = 0.2, seed: int = 0) -> None:
        host, port = upstream.rsplit(":", 1)
        self.upstream, self.rate, self.rng = (host, int(port)), rate, random.Random(seed)
        self.log: list[Request] = []
        self.lock = threading.Lock()
        self._hold: tuple[Match, float, int] | None = None
        self._fail: list = []  # [match, times left]
        self._burst: list = []  # [match, seconds, error, end (set by the first request it answers)]
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.endpoint = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def hold(self, match: Match, seconds: float, then_throttle: float = 0.0) -> None:
        """The next request that `match`es is forwarded and its answer held `seconds` (past the client's timeout);
        the requests for the same key in the `then_throttle` seconds after it are answered 503 SlowDown."""
        self._hold = (match, seconds, then_throttle)

    def throttle(self, match: Match, seconds: float, error: str = "SlowDown") -> None:
        """A burst: the requests that `match` in the `seconds` from the first of them on are answered `error`
        (not forwarded). pyarrow retries a request of a URI's filesystem for up to 6 s: a longer burst outlasts it."""
        self._burst = [match, seconds, error, None]

    def fail_after(self, match: Match, times: int | None = None) -> None:
        """The next `times` requests that `match` (None: all of them, until `fail_after(None)`) are forwarded, then
        answered 500 InternalError."""
        self._fail = [match, times] if match is not None else []

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _decide(self, req: Request) -> tuple[str | None, float]:
        """(the fault for `req`, seconds to hold its answer), drawn under the lock in the order requests come."""
        with self.lock:
            self.log.append(req)
            draw, error = self.rng.random(), self.rng.choice(ERRORS)
            if self._burst and self._burst[0](req):
                match, seconds, error, end = self._burst
                self._burst[3] = end = time.monotonic() + seconds if end is None else end
                if time.monotonic() < end:
                    return error, 0.0
            if self._hold is not None and self._hold[0](req):
                (_, seconds, then), self._hold = self._hold, None
                self._burst = [lambda r: r.key == req.key, then, "SlowDown", None]
                return "held", seconds
            if self._fail and self._fail[1] != 0 and self._fail[0](req):
                self._fail[1] = None if self._fail[1] is None else self._fail[1] - 1
                return "landed-then-500", 0.0
            return (error[1] if draw < self.rate else None), 0.0


def _handler(proxy: ErringS3):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _body(self) -> tuple[bytes, bool]:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                out = b""
                while True:
                    n = int(self.rfile.readline().split(b";")[0], 16)
                    if n == 0:  # then trailers, up to a blank line
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return out, True
                    out += self.rfile.read(n)
                    self.rfile.readline()
            n = int(self.headers.get("Content-Length") or 0)
            return (self.rfile.read(n) if n else b""), False

        def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes, length: str | None = None) -> None:
            """`length`: a HEAD's Content-Length (that of the object it describes; its body is empty)."""
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", length if self.command == "HEAD" and length else str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _error(self, req: Request, name: str) -> None:
            status, code, message = next(e for e in ERRORS if e[1] == name)
            body = (
                f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
                f"<RequestId>{uuid.uuid4().hex[:16].upper()}</RequestId></Error>"
            ).encode()
            self._answer(status, [("Content-Type", "application/xml")], body)

        def _forward(self, body: bytes, chunked: bool) -> tuple[int, list, bytes, str | None]:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
            if chunked:
                headers["Content-Length"] = str(len(body))
            conn = http.client.HTTPConnection(*proxy.upstream, timeout=120)
            try:
                sent = body if body or self.command in ("PUT", "POST") else None
                conn.request(self.command, self.path, body=sent, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
            finally:
                conn.close()
            skip = HOP | {"content-length", "server", "date"}
            kept = [(k, v) for k, v in resp.getheaders() if k.lower() not in skip]
            return resp.status, kept, data, resp.getheader("Content-Length")

        def handle_any(self) -> None:
            body, chunked = self._body()
            url = urlsplit(self.path)
            req = Request(self.command, unquote(url.path).lstrip("/"), url.query)
            req.fault, hold = proxy._decide(req)
            if req.fault in ("SlowDown", "InternalError", "ServiceUnavailable"):
                return self._error(req, req.fault)
            status, headers, data, length = self._forward(body, chunked)
            req.upstream = status
            try:
                if req.fault == "held":
                    time.sleep(hold)  # the client gave up: what it is sent next goes nowhere
                    self.close_connection = True
                if req.fault == "landed-then-500":
                    return self._error(req, "InternalError")
                self._answer(status, headers, data, length)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any

        def handle(self) -> None:
            try:
                super().handle()
            except (BrokenPipeError, ConnectionResetError, TimeoutError):
                pass

    return Handler


def writes_of(log: list[Request], key: str) -> list[Request]:
    """The requests that upload `key` (a one-shot PUT, a part of a multipart upload, its completion)."""
    return [r for r in log if r.key == key and (r.method == "PUT" or (r.method == "POST" and "uploadId=" in r.query))]


@pytest.fixture
def erring(s3, monkeypatch):
    """The erring proxy (a fifth of the requests answered 500/503, seed 0) in front of the `s3` fixture's moto
    server (tests/sweep/store/test_storage.py), with the store's own waits short for the tests."""
    monkeypatch.setenv(BACKOFF_ENV, "0.05")
    proxy = ErringS3(s3, rate=0.2, seed=0)
    yield proxy
    proxy.close()
