"""Where a run's units go on a cluster of several nodes: each on the node that holds the frozen halves it reads.

A frozen half f<=i (a donor's front up to a stitch point) is node-local: the donor stage's pass writes it to the
node's cache folder and its worker's memory (`sweep.worker.feed`), and a unit that computes one keeps it there
too (`sweep.worker.cache`). A trial that Ray starts on another node computes its front again. So, on a cluster
whose nodes each have a resource that names them alone (`handles`), the search algorithm (`feed.SweepUnits`)
asks `pick` for each unit it hands out: the node holding most of the unit's halves where a slot of it is free
(looking ahead in the stage's order for such a unit), else the node with the most free slots (its units
compute there what they read). The unit then asks Ray for a sliver of that node's resource (`Pinned`), so that
Ray starts it there and Tune reuses that node's actors for it. What each unit left where is learned from the
node each finished unit reports (`ran`).

A pinned unit must not wait for a node that is gone: the units pinned to a lost node (retried, or waiting for
their actor) are `stranded`, and `repin` moves each to a live one (`feed.Prune` looks at every step). Nodes
that join later are counted at the next `refresh`.

Without two such nodes (one machine, or nodes that share an address and have no `stitchsweep_node_*`
resource), or with `STITCHSWEEP_PLACEMENT=off`, nothing is pinned: Ray places each unit where a slot frees.
Either way, on several nodes, each stage ends with a line saying how many of its units ran on a node that held
their halves and how many computed them again on another.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

from sweep.config.errors import SpecError

ENV = "STITCHSWEEP_PLACEMENT"
PREFIX = "stitchsweep_node_"  # a node's own resource: `ray start --resources '{"stitchsweep_node_a": 1}'`
SLIVER = 0.001  # of a node's resource that a pinned unit asks for (a node's `node:<ip>` resource is 1.0)
WINDOW = 64  # units looked at ahead in a stage's order for one whose node has a free slot
REFRESH_S = 5.0

Node = dict  # one of `ray.nodes()`: "NodeID", "Alive", "NodeManagerAddress", "Resources"


def enabled(env: dict | None = None) -> bool:
    """`STITCHSWEEP_PLACEMENT`: "on" (the default) or "off"; anything else is a SpecError naming it."""
    raw = (os.environ if env is None else env).get(ENV, "on").strip().lower() or "on"
    if raw not in ("on", "off"):
        raise SpecError(ENV, "'on' (units placed on the node holding their frozen halves) or 'off'", raw)
    return raw == "on"


def handles(nodes: list[Node]) -> dict[str, str]:
    """Node id -> the Ray resource that names that node alone, for each live node that has one: a
    `stitchsweep_node_*` resource no other live node has, else its `node:<address>` where no other live node
    shares the address (several nodes on one machine do)."""
    alive = [n for n in nodes if n.get("Alive")]
    owners: dict[str, list[str]] = {}
    for n in alive:
        for key in n.get("Resources", {}):
            if key.startswith(PREFIX) or (key.startswith("node:") and not key.startswith("node:__")):
                owners.setdefault(key, []).append(n["NodeID"])
    out = {}
    for n in alive:
        own = sorted(k for k in n.get("Resources", {}) if owners.get(k) == [n["NodeID"]])
        named = [k for k in own if k.startswith(PREFIX)] or [k for k in own if k.startswith("node:")]
        if named:
            out[n["NodeID"]] = named[0]
    return out


def slots_of(node: Node, resources: dict) -> int:
    """How many units asking for `resources` (`trial_resources`' "cpu", "gpu", "memory") the node holds."""
    from sweep.backends.feed import units_fit

    return max(0, units_fit(resources, node.get("Resources", {})))


class Pinned:
    """Tune's resources of a unit (`tune.with_resources` with a callable): `resources`, and a sliver of its
    node's resource where the search algorithm pinned it (`config["node"]`)."""

    def __init__(self, resources: dict) -> None:
        self.resources = resources

    def __call__(self, config: dict):
        from ray.tune.execution.placement_groups import resource_dict_to_pg_factory

        return resource_dict_to_pg_factory(self.request(config.get("node")))

    def request(self, handle: str | None) -> dict:
        return {**self.resources, handle: SLIVER} if handle else dict(self.resources)


class Placement:
    """The driver's map of which node holds which frozen half, and the units pinned to each node.

    `kinds`: kind name -> `Kind` (its `halves` and `leaves`), `units`: kind name -> unit id -> unit,
    `resources`: what a unit asks for, `nodes()`: the cluster's nodes now (`ray.nodes`)."""

    def __init__(self, kinds: dict, units: dict, resources: dict, nodes: Callable[[], list[Node]], on: bool) -> None:
        self.kinds, self.units, self.pinned = kinds, units, Pinned(resources)
        self.nodes, self.on = nodes, on
        self.held: dict[tuple, set[str]] = {}  # (donor key, point) -> the nodes that hold it
        self.live: dict[str, str] = {}  # trial id -> the node it is pinned to
        self.tally: dict[str, dict[str, int]] = {}  # kind -> counts of its units by where they ran
        self.reserved: dict[str, int] = {}  # handle -> the idle actors Tune's cache keeps for it (`reserve`)
        self.checked, self.pinning, self.several = -math.inf, False, False
        self.refresh(force=True)

    def refresh(self, force: bool = False) -> None:
        """The live nodes' handles and slots, at most every `REFRESH_S` seconds. Units are pinned once two live
        nodes are named and every live node that holds a unit is (an unnamed one would be left idle), and
        stay pinned while one named node lives (Tune keeps the pinned nodes' actors: `reserve`)."""
        if not force and time.monotonic() - self.checked < REFRESH_S:
            return
        self.checked = time.monotonic()
        nodes = [n for n in self.nodes() if n.get("Alive")]
        self.several = self.several or len(nodes) > 1  # a run that lost a node still says where its units ran
        self.handle = handles(nodes)
        self.node_of = {h: nid for nid, h in self.handle.items()}
        slots = {n["NodeID"]: slots_of(n, self.pinned.resources) for n in nodes}
        self.slots = {nid: n for nid, n in slots.items() if nid in self.handle}
        unnamed = any(n for nid, n in slots.items() if nid not in self.handle)
        named = len(self.handle) > 1 or (self.pinning and len(self.handle) == 1)
        self.pinning = self.on and named and not unnamed

    @property
    def active(self) -> bool:
        return self.pinning

    def reserve(self, actor_cache) -> None:
        """Keep as many of each named node's idle actors in Tune's actor cache as the node has slots (Tune keeps
        one idle actor in all, across its resource requests: the next unit pinned to the node would start a
        new worker, importing PyTorch and loading its data again); let them go when units are no longer
        pinned."""
        want = {h: self.slots[nid] for nid, h in self.handle.items()} if self.pinning else {}
        for handle in set(self.reserved) | set(want):
            by = want.get(handle, 0) - self.reserved.get(handle, 0)
            if by:
                key = self.pinned({"node": handle})
                actor_cache.increase_max(key, by) if by > 0 else actor_cache.decrease_max(key, -by)
                self.reserved[handle] = want.get(handle, 0)

    def _halves(self, kind: str, uid: str, leaves: bool = False) -> list[tuple]:
        k, unit = self.kinds[kind], self.units[kind][uid]
        found = list(k.halves(unit)) if k.halves else []
        if leaves and k.leaves is not None:
            from sweep.kinds.base import resolve

            found += resolve(k.leaves)(unit)
        return list(dict.fromkeys(found))

    def home(self, kind: str, uid: str) -> str | None:
        """The live node holding most of the unit's halves (ties: the node of the first one, its front), or
        None."""
        score: dict[str, int] = {}
        for half in self._halves(kind, uid):
            for nid in sorted(self.held.get(half, ())):
                if nid in self.handle:
                    score[nid] = score.get(nid, 0) + 1
        return max(score, key=score.get) if score else None  # dicts keep order: the first half's node wins ties

    def free(self) -> dict[str, int]:
        """Live node id -> its slots not taken by a unit pinned to it."""
        free = dict(self.slots)
        for handle in self.live.values():
            if (nid := self.node_of.get(handle)) in free:
                free[nid] -= 1
        return free

    def _roomiest(self) -> str | None:
        """The named node with the most free slots (it may have none: a unit pinned there waits for one)."""
        free = self.free()
        return max(free, key=free.get) if free else None

    def pick(self, kind: str, order: list[str], start: int, trial_id: str) -> tuple[int, str | None]:
        """Which of `order[start:]` to hand out next (its index) and the handle of the node it is pinned to
        (None: not pinned). The first unit (within `WINDOW`) whose node has a free slot and holds every half of it
        held anywhere, else the first whose node has a free slot; else the first unit no node holds anything of,
        or the first unit, on the node with the most free slots (it computes its halves there)."""
        if self.on:
            self.refresh()  # a cluster that grows: its new nodes
        if not self.active:
            return start, None
        free = self.free()
        ahead = range(start, min(len(order), start + WINDOW))
        homes = {i: self.home(kind, order[i]) for i in ahead}
        room = [(i, h) for i, h in homes.items() if h is not None and free.get(h, 0) > 0]
        whole = (
            c for c in room if all(c[1] in self.held[x] for x in self._halves(kind, order[c[0]]) if x in self.held)
        )
        chosen = next(whole, room[0] if room else None)  # a unit whose every half its node holds, first
        if chosen is None:
            roomiest = self._roomiest()
            if roomiest is None:  # no named node lives: Ray places it
                return start, None
            chosen = next(((i, roomiest) for i, h in homes.items() if h is None), (start, roomiest))
        self.live[trial_id] = self.handle[chosen[1]]
        return chosen[0], self.handle[chosen[1]]

    def ended(self, trial_id: str) -> None:
        self.live.pop(trial_id, None)

    def ran(self, kind: str, uid: str, node: str, pinned: str | None) -> None:
        """A unit finished on `node`: count where it ran (on a node that held its halves, or elsewhere,
        computing them again), then note the halves it leaves there."""
        tally = self.tally.setdefault(kind, {"units": 0, "home": 0, "away": 0, "moved": 0})
        tally["units"] += 1
        reads = self._halves(kind, uid)
        held = [self.held[h] for h in reads if self.held.get(h)]
        if held:
            tally["home" if all(node in nodes for nodes in held) else "away"] += 1
        if pinned is not None and self.node_of.get(pinned, node) != node:
            tally["moved"] += 1  # Ray did not honour the pin: never, unless a node's resource names another
        for half in self._halves(kind, uid, leaves=True):
            self.held.setdefault(half, set()).add(node)

    def line(self, kind: str) -> str | None:
        """The stage's placement, on a cluster of several nodes (None otherwise, or when no unit read a half
        another unit had left)."""
        t = self.tally.get(kind)
        if not self.several or not t or not (t["home"] or t["away"]):
            return None
        how = "units pinned to the node holding their halves" if self.active else "units placed by Ray, not pinned"
        moved = f"; {t['moved']} ran elsewhere than pinned" if t["moved"] else ""
        return (
            f"placement ({how}): {t['home']} of {t['units']} units ran on a node that held the frozen halves they"
            f" read, {t['away']} computed them again on another node{moved}"
        )

    def stranded(self, trials) -> list:
        """Those of `trials` not running (retried, or waiting for their actor) that are pinned to a node that is
        gone (the nodes are looked at again at most every `REFRESH_S` seconds)."""
        self.refresh()
        return [t for t in trials if t.trial_id in self.live and self.live[t.trial_id] not in self.node_of]

    def repin(self, trial):
        """Tune's resources for `trial` on the named node with the most free slots (not pinned where no named
        node lives), the node it was pinned to being gone."""
        self.live.pop(trial.trial_id, None)
        nid = self._roomiest()
        if nid is not None:
            self.live[trial.trial_id] = self.handle[nid]
        return self.pinned(dict(trial.config, node=self.live.get(trial.trial_id)))
