"""One driver per sweep: `run`/`resume` hold a lease on the results directory (`RESULTS/driver.lease`) while
they run, renewed by a heartbeat; a second driver of the same sweep is refused while the lease is fresh, and
takes it over once the heartbeat is older than `STALE_S` (its holder crashed or was killed).

The lease is created exclusively: `O_CREAT | O_EXCL` on a local folder (and on NFS v3+, where exclusive create
is atomic). A lease whose holder ran on this host and whose process is gone is taken over at once. On object
stores pyarrow has no create-if-absent, so there the lease is written after a check:
two drivers started within the same second can both pass it. That window is the guarantee we give there; the
trials stay idempotent whatever happens (a unit whose part exists is skipped), so the price of the race is
duplicated work, never duplicated or lost rows.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from datetime import datetime, timezone

from sweep.config.errors import SpecError
from sweep.store.results import Loc, SweepDir

LEASE_FILE = "driver.lease"
HEARTBEAT_S = 20.0
STALE_S = 120.0  # a lease not renewed for this long belongs to a driver that is gone


class Lease:
    """Held with `with Lease(sweep_dir):` around a run; refuses to start when another driver holds it."""

    def __init__(self, sweep_dir: SweepDir, clock=time.time, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.loc: Loc = sweep_dir.path / LEASE_FILE
        self.uri = sweep_dir.uri
        self.clock, self.heartbeat_s = clock, heartbeat_s
        self.me = {"pid": os.getpid(), "host": socket.gethostname(), "started": _now()}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Lease:
        held = self._read()
        if held is not None and self.clock() - held.get("beat", 0.0) < STALE_S and self._alive(held):
            ago = self.clock() - held.get("beat", 0.0)
            raise SpecError(
                "RESULTS",
                "a sweep no other driver is running",
                self.uri,
                f"pid {held.get('pid')} on {held.get('host')} has run it since {held.get('started')}, last"
                f" heartbeat {ago:.0f} s ago; wait for it, or if it is gone, wait {STALE_S:.0f} s (or delete"
                f" {self.loc}) and resume",
            )
        if held is not None:
            print(f"note: taking over the lease of a driver gone since {held.get('started')} ({self.loc})", flush=True)
            self.loc.unlink(missing_ok=True)
        self._create()
        self._thread = threading.Thread(target=self._beat, name="stitchsweep-lease", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        held = self._read()
        if held is not None and held.get("pid") == self.me["pid"] and held.get("host") == self.me["host"]:
            self.loc.unlink(missing_ok=True)

    def _alive(self, held: dict) -> bool:
        """Whether the holder may still run: always, unless it ran on this host and its process is gone (a
        driver killed a moment ago is taken over at once, not after STALE_S)."""
        if held.get("host") != self.me["host"] or not isinstance(held.get("pid"), int):
            return True
        try:
            os.kill(held["pid"], 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # someone else's process: alive
            return True
        return True

    def _doc(self) -> str:
        return json.dumps({**self.me, "beat": self.clock()})

    def _create(self) -> None:
        if self.loc.is_local:
            try:
                fd = os.open(self.loc.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:  # another driver got there first, between our read and now
                raise SpecError(
                    "RESULTS", "a sweep no other driver is running", self.uri, "another driver just took it"
                ) from None
            with os.fdopen(fd, "w") as fh:
                fh.write(self._doc())
        else:
            self.loc.write_text(self._doc())

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                self.loc.write_text(self._doc())
            except OSError as exc:  # storage hiccup: the next beat tries again
                print(f"note: could not renew the driver lease {self.loc}: {exc}", flush=True)

    def _read(self) -> dict | None:
        try:
            return json.loads(self.loc.read_text())
        except FileNotFoundError:
            return None
        except (ValueError, OSError):  # half-written or unreadable: treat as a lease of unknown age
            return {"beat": 0.0}


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
