"""How many units a run's nodes hold at once, by memory as well as by CPUs and GPUs, before anything is
scheduled: each planned kind's largest unit's worker need (`sweep.planning.worker_memory`; the space's
`resources.memory_per_trial` instead where it sets one) against each live node's memory that Ray gives its
tasks. `run` lowers Tune's `max_concurrent_trials` to what fits (one line says so) and refuses only a unit that
fits on no node. Without Ray: `sweep.backends.ray` hands it the nodes' resources."""

from __future__ import annotations

import math

from sweep.backends.feed import slots
from sweep.backends.stage import trial_resources
from sweep.config.errors import SpecError
from sweep.config.space import Sweep
from sweep.costs.memory import GiB
from sweep.planning.worker_memory import UnitMemory, holds, unit_needs


def concurrency(nodes: list[dict], resources: dict, unit_bytes: int) -> int:
    """How many units run at once on `nodes` (each a live node's Ray resources: "CPU", "GPU", "memory" in
    bytes), each taking `resources` (`trial_resources`' "cpu" and "gpu") and `unit_bytes` of memory: per node
    the fewest its CPUs, GPUs and memory allow, summed over the nodes."""
    total = 0
    for node in nodes:
        fits = [holds(node.get("memory", 0.0), unit_bytes)]
        for key, name in (("cpu", "CPU"), ("gpu", "GPU")):
            if resources.get(key):
                fits.append(math.floor(node.get(name, 0.0) / resources[key] + 1e-9))
        total += min(fits)
    return total


def largest(sweep: Sweep, plan: dict[str, list[str]]) -> UnitMemory | None:
    """The planned unit with the largest worker need (None: nothing planned)."""
    from sweep.registry import KINDS

    units = {}
    for name, ids in plan.items():
        if ids and name in KINDS:
            everything = KINDS[name].units(sweep)
            units[name] = {uid: everything[uid] for uid in ids if uid in everything}
    needs = unit_needs(sweep, units).values()
    return max(needs, key=lambda x: x.bytes, default=None)


def refuse(need: UnitMemory, node_bytes: float) -> SpecError:
    """A unit larger than the largest node: the field to set and the batch sizes to lower."""
    batches = f"lower the batch sizes ({'; '.join(need.batch)}), " if need.batch else "lower the batch sizes, "
    return SpecError(
        "resources.memory_per_trial",
        f"a unit that fits on a node: the largest gives its tasks {node_bytes / GiB:.1f} GiB, a {need.kind} unit"
        f" ({need.label}) needs about {need.bytes / GiB:.1f} GiB ({need.parts()})",
        "unset",
        f"{batches}set resources.memory_per_trial to what a unit takes (GiB) if this estimate is too high, or join"
        " a cluster with larger nodes (--address)",
    )


def fitted(sweep: Sweep, plan: dict[str, list[str]], nodes: list[dict], max_concurrent: int | None) -> tuple[dict, int]:
    """(each unit's Ray resources, how many run at once): `slots`, lowered to what the nodes' memory holds of
    the largest planned unit (one printed line when it is). Raises `SpecError` when that unit fits no node."""
    resources = trial_resources(sweep)
    at_once = slots(resources, _totals(nodes), max_concurrent)
    need = largest(sweep, plan)
    if need is None:
        return resources, at_once
    unit = int(sweep.memory_per_trial * GiB) if sweep.memory_per_trial else need.bytes
    room = max((n.get("memory", 0.0) for n in nodes), default=0.0)
    if not sweep.memory_per_trial and not holds(room, unit):
        raise refuse(need, room)
    fits = max(1, concurrency(nodes, resources, unit))
    if fits < at_once:
        source = "resources.memory_per_trial" if sweep.memory_per_trial else f"a {need.kind} unit's estimate"
        print(
            f"memory: {fits} unit{'s' if fits > 1 else ''} at once, not {at_once}: the nodes' memory holds {fits} of"
            f" {unit / GiB:.1f} GiB ({source})",
            flush=True,
        )
        at_once = fits
    return resources, at_once


def _totals(nodes: list[dict]) -> dict:
    """The cluster's totals of the nodes' resources (`ray.cluster_resources()` of these nodes)."""
    out: dict[str, float] = {}
    for node in nodes:
        for key, value in node.items():
            if isinstance(value, (int, float)):
                out[key] = out.get(key, 0.0) + value
    return out
