"""The wall time of a plan (`plan --estimate`): the units' device time spread over the workers that run them, plus
the fixed costs no unit accounts for, each measured by `tests/benchmarks/fixed_costs.py` into the profile:

- `startup_s`: the command's own start and end (Python, the driver's imports, Ray's lean node started and
  stopped), once;
- `stage_s`: a worker's start, PyTorch's import and its data's load (with the run's one Tune experiment), paid
  by the first stage whole (its workers start side by side); a later stage runs on a worker kept from the stage
  before while the others (at most the stage's units at once, less one) start: they cost it `stage_s` x
  (k - 1) / k of wall time, k the units it runs at once;
- `measuring`: the seconds the driver spends measuring a plugin's architectures the profile lacks
  (`sweep.planning.calibration.measure_here`: `run` prices its ETA with them too), once;
- the units' work, each with the profile's `unit_s` (a unit's fixed cost on a warm worker), priced by
  `sweep.planning.estimate`. A profile is timed with `threads` threads (calibrate.py's `--threads`); a stage of n units
  runs min(n, workers) of them at once with `cpus_per_trial` threads each, so its work takes its device time x
  threads / (min(n, workers) x threads per unit) (on a GPU profile: its device time / min(n, workers)).
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass
class Wall:
    """Seconds of a run's wall time, by part."""

    startup: float
    stages: float
    work: float
    workers: int
    n_stages: int
    measuring: float = 0.0

    @property
    def total(self) -> float:
        return self.startup + self.measuring + self.stages + self.work


def default_workers(sweep) -> int:
    """The units `run` runs at once on this machine: its CPUs over the space's `cpus_per_trial`."""
    per = max(float(sweep.cpus_per_trial), 1.0)
    return max(1, int((os.cpu_count() or 1) // per))


def wall_time(seconds: dict[str, float], units: dict[str, int], profile: dict, sweep, workers: int,
              missing: set[str], measuring: float = 0.0) -> Wall:  # fmt: skip
    """The wall time of running `units` (kind -> count) whose device time is `seconds` (kind -> s) with
    `workers` at once, the driver measuring for `measuring` seconds first; what the profile lacks of the fixed
    costs goes into `missing`."""
    for key, what in (("startup_s", "the command's start-up"), ("stage_s", "the workers' start")):
        if key not in profile:
            missing.add(f"{what} (no `{key}`: tests/benchmarks/calibrate.py --fixed)")
    stages = [k for k, n in units.items() if n]
    cpu = profile.get("device", "cpu") == "cpu"
    threads = float(profile.get("threads", 2))
    per_unit = max(1, int(sweep.cpus_per_trial))  # the torch threads a worker gets (`sweep.backends.ray._threads`)
    work = 0.0
    for kind in stages:
        at_once = min(units[kind], workers)
        work += seconds[kind] * threads / (at_once * per_unit) if cpu else seconds[kind] / at_once
    startup = float(profile.get("startup_s", 0.0))
    stage = float(profile.get("stage_s", 0.0)) * later_stages([min(units[k], workers) for k in stages])
    return Wall(startup, stage, work, workers, len(stages), measuring)


def later_stages(at_once: list[int]) -> float:
    """The stages' fixed costs in units of `stage_s`: the first stage's workers start side by side (1); a later
    stage that runs k units at once starts k - 1 workers beside the one the stage before left, which runs units
    meanwhile: (k - 1) / k of its wall time."""
    if not at_once:
        return 0.0
    return 1.0 + sum((k - 1) / k for k in at_once[1:] if k > 0)
