"""The embedded Ray node of a sweep without `--address`: the processes a sweep on one machine uses, and no others.

`ray.init()` on a machine starts, besides the GCS, the raylet and its agents, three Python processes a sweep
never talks to: the autoscaler's monitor (nothing to scale on one machine), the log monitor (it forwards the
workers' output to the driver, which a sweep turns off: a unit's output is in its Parquet part and its log)
and the API server behind the dashboard and the state API (nothing reads them while the command runs). On the
2-core machine they cost about 0.8 s of start-up and another second of shutting down, on every command
(docs/performance.md, "Fixed costs of a command"). `start_lean` starts the node without them and joins it
(`begin_lean` starts it in the background, while the driver imports Tune); `stop_lean` shuts it down. The
raylet's own agents (runtime environments, metrics) stay: workers need them.

Ray has no public switch for these processes: the node is started through `ray._private.node.Node`, as
`ray.init()` itself does, with the parameters `ray start --head` exposes as `--no-monitor` and
`--include-log-monitor=false`. Ray's version is pinned by the lock file; `tests/sweep/backends/test_node.py` checks the
node on each upgrade: the processes it starts, and that none is left after it stops or after its driver is
killed (`tests/sweep/backends/test_ray.py` runs sweeps on it). `STITCHSWEEP_FULL_RAY=1` starts Ray as `ray.init()` does,
dashboard and all, for whoever wants to watch a sweep in Ray's dashboard (as `ray start --head` and
`--address` do on a cluster).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from concurrent.futures import Future

import ray
import ray._private.node as ray_node
import ray._private.parameter as ray_parameter
from ray._common.usage import usage_lib
from ray._private.authentication import authentication_token_setup as ray_auth

from sweep.config.errors import SpecError


class _Node(ray_node.Node):
    """A head node without the API server (dashboard, state API, job submission): nothing of a sweep reads them."""

    def start_api_server(self, *, include_dashboard, raise_on_failure) -> None:
        return None


class _Started:
    """A node started by a thread that stays until the node is stopped: Ray's processes die with the thread
    that started them (Linux's parent-death signal follows the thread, not the process)."""

    def __init__(self, num_cpus: int | None) -> None:
        self.node: Future = Future()
        self.stopped = threading.Event()
        threading.Thread(target=self._start_and_stay, args=(num_cpus,), name="ray-node", daemon=True).start()
        atexit.register(self.stop)  # should the driver end without stopping it (the reaper covers a crash)

    def _start_and_stay(self, num_cpus: int | None) -> None:
        try:
            self.node.set_result(_new_node(num_cpus))
        except BaseException as exc:
            self.node.set_exception(exc)
            return
        self.stopped.wait()

    def stop(self) -> None:
        try:
            node = self.node.result()  # a node still starting is waited for, then stopped
        except BaseException:  # it never started: nothing to stop
            node = None
        if node is not None:
            _kill(node)
        self.stopped.set()


_STARTING: _Started | None = None  # `begin_lean`'s node until `start_lean` joins it
_STARTED: _Started | None = None  # the node this process runs on, until `stop_lean`


def lean_node() -> bool:
    """Whether this process runs on an embedded node it started (whose workers inherit its environment)."""
    return _STARTED is not None


def full_ray_wanted() -> bool:
    return os.environ.get("STITCHSWEEP_FULL_RAY", "") not in ("", "0")


def begin_lean(num_cpus: int | None) -> None:
    """Start the node in the background and return: the driver imports Tune (half a second on the 2-core
    machine) while the node's processes start (a second and a half, mostly waiting for them)."""
    global _STARTING
    if not (full_ray_wanted() or ray.is_initialized() or _STARTING or _STARTED):
        _STARTING = _Started(num_cpus)


def start_lean(num_cpus: int | None, runtime_env: dict | None = None) -> None:
    """Join the node `begin_lean` started, or start one on this machine with `num_cpus` CPUs (None: all of
    them), and connect this process to it."""
    global _STARTING, _STARTED
    if full_ray_wanted():
        # the dashboard where its packages are installed
        ray.init(num_cpus=num_cpus, log_to_driver=False, runtime_env=runtime_env)
        return
    started, _STARTING = _STARTING or _Started(num_cpus), None
    node = started.node.result()
    quiet = _Quiet()
    logging.getLogger("ray._private.worker").addFilter(quiet)
    try:
        ray.init(address=node.address, log_to_driver=False, runtime_env=runtime_env)
    except BaseException:
        started.stop()
        raise
    finally:
        logging.getLogger("ray._private.worker").removeFilter(quiet)
    _STARTED = started
    cpus = int(ray.cluster_resources().get("CPU", 0))
    print(f"Ray: a local node with {cpus} CPUs (no dashboard; STITCHSWEEP_FULL_RAY=1 starts one)", flush=True)


def stop_lean() -> None:
    """Disconnect, then stop the node `start_lean` started (gracefully: each process is asked to end first)."""
    global _STARTED
    ray.shutdown()
    started, _STARTED = _STARTED, None
    if started is not None:
        started.stop()


def _new_node(num_cpus: int | None) -> ray_node.Node:
    # What `ray.init()` does before it starts a node: token authentication on unless RAY_AUTH_MODE says
    # otherwise (a token made in ~/.ray if there is none; the warning that it is on says nothing a user of
    # a node that lives and dies with this process can act on), no usage statistics.
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
    ray_auth.enable_token_auth_by_default()
    ray_auth.ensure_token_if_auth_enabled({}, create_token_if_missing=True)
    usage_lib.set_usage_stats_enabled_via_env_var(False)
    # What Tune sets on each trial's actor (PyTorch Lightning's fork-based launchers off), set where the node's
    # workers inherit it: on this node, trial actors run without Tune's runtime environment (`sweep.backends.ray`).
    os.environ.setdefault("PL_DISABLE_FORK", "1")
    params = ray_parameter.RayParams(
        num_cpus=num_cpus, include_dashboard=False, no_monitor=True, include_log_monitor=False
    )
    # spawn_reaper: a process that kills the node's processes should this one die without stopping them
    return _Node(ray_params=params, head=True, shutdown_at_exit=False, spawn_reaper=True, ray_init_cluster=True)


def _kill(node: ray_node.Node) -> None:
    if node.remaining_processes_alive():
        node.kill_all_processes(check_alive=False, allow_graceful=True)


class _Quiet(logging.Filter):
    """Ray's "Connecting to existing Ray cluster" when the driver joins the node it has just started."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Connect" not in record.getMessage()


def start_ray(address: str | None, num_cpus: int | None, runtime_env: dict | None = None) -> bool:
    """Join `address`, or start an embedded local Ray, with the job's `runtime_env` (the plugins' code).
    Returns whether we started it."""
    if ray.is_initialized():
        return False
    if address:
        from sweep.backends.checks import _check_reachable

        _check_reachable(address)
        try:
            ray.init(address=address, log_to_driver=False, runtime_env=runtime_env)
        except ConnectionError as exc:
            hint = (
                "; if the cluster uses token authentication (the default of `ray start --head` in Ray 2.60),"
                " give this machine its token: RAY_AUTH_TOKEN, or the file ~/.ray/auth_token"
            )
            raise SpecError("--address", "a running Ray cluster", address, str(exc).splitlines()[0] + hint) from None
    else:
        start_lean(num_cpus, runtime_env)
    return True
