"""Joining a Ray cluster from the library and the command line: its token (`cluster_auth`, before Ray is
imported) and its live nodes' memory (`cluster_nodes`, what `plan --address` counts units on)."""

from __future__ import annotations

import os
from pathlib import Path


def cluster_auth(address: str | None) -> None:
    """Joining a cluster: present its token when one is at hand. Ray 2.60's `ray start --head` turns token
    authentication on, but a connecting driver only sends the token with RAY_AUTH_MODE=token (which also
    works against a cluster without authentication). Must run before Ray is imported."""
    if not address or "RAY_AUTH_MODE" in os.environ:
        return
    token_file = Path(os.environ.get("RAY_AUTH_TOKEN_PATH", "~/.ray/auth_token")).expanduser()
    if os.environ.get("RAY_AUTH_TOKEN") or token_file.is_file():
        os.environ["RAY_AUTH_MODE"] = "token"


def cluster_nodes(address: str) -> list[dict]:
    """The live nodes of the Ray cluster at `address`: each its name (the node's IP address and the start of its
    node id: `sweep.backends.checks.live_nodes`) and the memory Ray gives its tasks there, read by joining the
    cluster as a driver (with its token, as `run --address` joins) and leaving it; nothing is started on it.
    Nothing answering there: `SpecError`, in seconds."""
    cluster_auth(address)
    from sweep.backends.checks import live_nodes

    return live_nodes(address)
