"""What a stage hands Ray Tune and does around it, without Ray: each unit's resources, what a worker needs
besides its unit, the cost model's prices for the ETA, the plugins' `runtime_env`, and the end of a stage
(compaction, the donors' chance warnings). `sweep.backends.ray` runs the stages."""

from __future__ import annotations

import os

from sweep.config.errors import SpecError
from sweep.config.space import Sweep
from sweep.measures.chance import chance_warning
from sweep.store.results import SweepDir, part_rows


def trial_resources(sweep: Sweep) -> dict:
    """What Ray reserves for each unit: CPUs, GPUs and, when the space sets it, memory (Ray then places a unit
    only where that much is unreserved)."""
    resources = {"cpu": sweep.cpus_per_trial, "gpu": sweep.gpus_per_trial}
    if sweep.memory_per_trial:
        resources["memory"] = int(sweep.memory_per_trial * 2**30)
    return resources


def worker_env(sweep: Sweep) -> dict:
    """What a worker needs besides its unit: CPUs, GPU, data, the driver's cache settings, the plugins."""
    from sweep.config.plugins import worker_plugins

    return dict(
        cpus=sweep.cpus_per_trial,
        gpu=sweep.gpus_per_trial > 0,
        data_root=sweep.data_root,
        download=sweep.download,
        cache={k: v for k, v in os.environ.items() if k.startswith("STITCHSWEEP_CACHE")},
        share=True,
        plugins=worker_plugins(sweep.plugins),  # (module, version, form): a file, a package folder or a module
    )


def eta_prices(sweep: Sweep, plan: dict[str, list[str]]) -> tuple[dict[str, float], float]:
    """The cost model's price per unit of each kind and its fixed cost per stage, for the ETA (none when the
    shipped profile cannot be read: the ETA then waits for measured units only)."""
    from sweep.planning.estimate import unit_prices

    try:
        return unit_prices(sweep, plan)
    except (SpecError, KeyError, ValueError) as exc:  # the ETA is a convenience: it never stops a run
        print(f"note: no cost model for the ETA ({exc})", flush=True)
        return {}, 0.0


def plugin_env(sweep: Sweep) -> dict | None:
    """The job's `runtime_env`: the plugins' files and package folders (their content, not their paths) and the
    packages of their module names in `py_modules`, which Ray uploads once and puts on every worker's path, on
    this machine or another node."""
    from sweep.config.plugins import ray_modules

    return {"py_modules": ray_modules(sweep.plugins)} if sweep.plugins else None


def compact_stage(stage: str, sweep_dir: SweepDir) -> None:
    """At the end of a stage, no unit writes: the done parts (and any left loose before) of each table that
    holds more than `compact_above()` files go into compacted files (`sweep.store.compact`), so that no table
    holds more than that many files."""
    from sweep.store.compact import compact, compact_above

    done = compact(sweep_dir.path, above=compact_above())
    parts, files = sum(p for p, _ in done.values()), sum(f for _, f in done.values())
    if parts:
        print(f"[{stage}] compacted {parts} parts into {files} file(s)", flush=True)


def chance_warnings(sweep: Sweep, sweep_dir: SweepDir) -> list[str]:
    """The zoo stage's warnings about this sweep's donors that ended training at chance (`at_chance` in their
    rows of the donors table), one per donor."""
    keys, flagged = {d.donor_key for d in sweep.donors.values()}, {}
    for row in part_rows(sweep_dir.donors):
        if row.get("donor_key") in keys and row.get("at_chance"):
            flagged.setdefault(row["donor_key"], row)
    return [chance_warning(row) for row in flagged.values()]
