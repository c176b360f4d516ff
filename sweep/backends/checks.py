"""What is checked on a Ray cluster before anything is scheduled: that its head answers, that some node can
meet a trial's resources, that every node sees the storage and that a worker can have the data. Each refusal
is a `SpecError` naming the flag or field."""

from __future__ import annotations

import os
import socket

import ray

from sweep.config.errors import SpecError
from sweep.config.space import Sweep
from sweep.planning.planning import check_data
from sweep.store.results import Loc, SweepDir


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail in seconds, naming the address, when nothing listens at a host:port address (Ray itself would
    retry for a minute or more). "auto" and ray:// client addresses are left to Ray."""
    if address == "auto" or "://" in address or ":" not in address:
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except (OSError, ValueError) as exc:
        raise SpecError(
            "--address",
            "the host:port of a running Ray cluster's head (GCS)",
            address,
            f"nothing answers there within {timeout:g} s: {exc}",
        ) from None


def live_nodes(address: str) -> list[dict]:
    """Each live node of the cluster at `address` (joined as a driver, then left): its name (IP address and the
    start of its node id: nodes of one machine share the address) and the memory Ray gives its tasks there (its
    `memory` resource, bytes)."""
    _check_reachable(address)
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        alive = [n for n in ray.nodes() if n.get("Alive")]
        names = [f"{n.get('NodeManagerAddress', '?')}/{n['NodeID'][:8]}" for n in alive]
        return [{"name": name, "memory": n["Resources"].get("memory", 0.0)} for name, n in zip(names, alive)]
    finally:
        ray.shutdown()


def check_resources(sweep: Sweep, nodes: list[dict]) -> None:
    """Refuse, before scheduling anything, a per-trial request that no node of this cluster can meet
    (Ray would otherwise leave the trials pending for ever). `nodes` is the resources of each live node."""
    for field, key, want in (
        ("resources.gpus_per_trial", "GPU", sweep.gpus_per_trial),
        ("resources.cpus_per_trial", "CPU", sweep.cpus_per_trial),
    ):
        have = max((n.get(key, 0.0) for n in nodes), default=0.0)
        if want > have:
            raise SpecError(
                field,
                f"at most the {have:g} {key}s of the largest node of this Ray cluster",
                want,
                "lower it, or join a cluster that has them with --address",
            )
    have = max((n.get("memory", 0.0) for n in nodes), default=0.0) / 2**30
    if sweep.memory_per_trial and sweep.memory_per_trial > have:
        raise SpecError(
            "resources.memory_per_trial",
            f"at most the {have:.1f} GiB that the largest node of this Ray cluster gives its tasks",
            sweep.memory_per_trial,
            "lower it, or join a cluster whose nodes have more with --address",
        )


@ray.remote(num_cpus=0)
def _sees(path: Loc) -> tuple[str, bool]:
    try:
        seen = path.exists()
    except Exception:  # no credentials, endpoint unreachable from this node, ...
        seen = False
    return ray.util.get_node_ip_address(), seen


def blind_nodes(path: Loc, nodes: list[dict], timeout: float = 60.0) -> list[str]:
    """The IPs of live nodes that do not see `path` (a file the driver just wrote, on any storage): one
    zero-CPU task pinned to each node checks. A node that does not answer in time counts as blind."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    refs = {
        n["NodeManagerAddress"]: _sees.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
        ).remote(path)
        for n in nodes
    }
    blind = []
    for ip, ref in refs.items():
        try:
            _, seen = ray.get(ref, timeout=timeout)
        except Exception:
            seen = False
        if not seen:
            blind.append(ip)
    return blind


def _data_problem(sweep: Sweep) -> tuple | None:
    try:
        check_data(sweep)
    except SpecError as exc:
        return exc.field, exc.expected, exc.found, exc.hint
    return None


def check_data_on_a_worker(sweep: Sweep) -> None:
    """`check_data` run as a small task on a worker node (a cluster's driver may not see the workers' data
    root): a dataset no worker can have stops the run before anything is scheduled."""
    problem = ray.get(ray.remote(num_cpus=0)(_data_problem).remote(sweep))
    if problem:
        raise SpecError(*problem)


def check_storage_shared(sweep_dir: SweepDir, nodes: list[dict]) -> None:
    """On a cluster of several nodes, refuse storage that some node cannot see (a local folder of the
    head, say): their trials could read no donor and their results would be lost to the driver."""
    if len(nodes) < 2:
        return
    marker = sweep_dir.path / f".stitchsweep-visible-{os.getpid()}"
    marker.write_text("written by the driver to check that every node sees the storage\n")
    try:
        blind = blind_nodes(marker, nodes)
    finally:
        marker.unlink(missing_ok=True)
    if blind:
        raise SpecError(
            "--storage",
            "storage every node of the cluster sees: a shared folder (NFS, EFS, ...)"
            " mounted at the same path, or an object store (s3://, gs://) every node can reach",
            str(sweep_dir.root),
            f"not visible on node(s) {', '.join(blind)}",
        )
