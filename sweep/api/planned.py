"""`sweep.plan`: what a space holds, and with a storage what a run would do, before anything runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sweep.api.inputs import open_storage, read_space


@dataclass
class Plan:
    """What a space holds: its `sweep` (the validated space), its `units` (kind -> unit id -> unit, restricted to
    `only`), with `storage` what a run would do (`todo`: kind -> unit ids), and on request its `estimate`
    (`sweep.planning.estimate.Estimate`). `str(plan)` is what `stitchsweep plan` prints."""

    sweep: Any
    units: dict[str, dict[str, Any]]
    todo: dict[str, list[str]] | None = None
    estimate_lines: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return sum(len(u) for u in self.units.values())

    def __str__(self) -> str:
        return "\n".join(self.lines)

    def json(self) -> dict:
        """The plan as `stitchsweep plan --json` prints it."""
        from sweep.planning import planning

        return planning.plan_json(self.sweep, self.units, self.todo)


def plan(
    space, *, overrides=(), only=None, plugins=(), storage=None, estimate=False, costs=None, workers=None, full=False,
    address=None,
) -> Plan:  # fmt: skip
    """The units of `space` (see `read_space`), restricted to the selection `only` (a list of `field=glob`
    selections, as `--only`), with `storage` what is recorded there and what a run would do, and with
    `estimate` its cost under the profile `costs` (default: the shipped one) on `workers` workers; `full`: a line
    per unit (`plan --trials`); `address`: a running Ray cluster whose nodes the memory lines count (`plan
    --address`; joins it for its nodes' resources, starts nothing on it)."""
    from sweep.planning import disk, memory, planning, versions, worker_memory
    from sweep.planning.estimate import load_profile, plan_estimate
    from sweep.registry import KINDS
    from sweep.store.results import SweepDir

    if estimate:  # a wrong costs file is said before the space is read
        load_profile(costs)
    sweep = read_space(space, overrides, plugins)
    chosen = selection(sweep, only)
    if chosen is not None:  # what `run --only` runs: the selected units and the donors they read
        from sweep.planning.selection import with_donors

        chosen = with_donors(sweep, chosen)
    units = {name: kind.units(sweep) for name, kind in KINDS.items()}
    if chosen is not None:
        units = {name: {u: unit for u, unit in us.items() if u in chosen[name]} for name, us in units.items()}
    todo, sweep_dir = None, None
    if storage is not None:
        sweep_dir = SweepDir(open_storage(storage, "--storage"), sweep.name)
        exists = sweep_dir.path.exists()
        todo = planning.to_run(sweep, sweep_dir, retry_failed=False, dry=True, only=chosen) if exists else None
        disk.check_room(sweep, todo, sweep_dir)
    head = f"sweep {sweep.name}: " + ", ".join(f"{len(u)} {KINDS[k].noun}" for k, u in units.items() if u)
    body = [*sweep.generated, *planning.plan_lines(sweep, units, full=full), *memory.plan_lines(sweep)]
    from sweep.api.cluster import cluster_nodes

    nodes = cluster_nodes(address) if address else None
    body += worker_memory.plan_lines(sweep, units, nodes=nodes)
    lines = [head, *(f"  {line}" for line in body + disk.plan_lines(sweep, todo))]
    if storage is not None:
        for name, u in units.items():
            if u:
                left = len(u) if todo is None else len(todo.get(name, ()))
                lines.append(f"{KINDS[name].noun} under {storage}: {len(u) - left} recorded, {left} would run")
        lines += versions.plan_lines(sweep, sweep_dir, todo) if todo is not None else []
    known = sweep_dir if todo is not None else None
    priced = plan_estimate(sweep, units, todo, known, costs, workers) if estimate else []
    return Plan(sweep, units, todo, list(priced), lines + list(priced))


def selection(sweep, only, flag: str = "--only") -> dict[str, set[str]] | None:
    """Kind name -> the unit ids the selections `only` pick (`sweep.planning.selection`); None without any."""
    from sweep.planning.selection import select

    texts = [only] if isinstance(only, str) else list(only or ())
    return select(sweep, texts, flag) if texts else None
