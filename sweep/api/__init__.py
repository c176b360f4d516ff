"""stitchsweep as a library: plan, run, resume and watch a sweep from Python (a script, a notebook), with what
the command line does, since the command line is a thin layer over these functions (`sweep.cli.commands`).

    import sweep

    plan = sweep.plan("quickstart", overrides=["stitching.*.epochs=1"])   # a path, a shipped name, YAML or a dict
    print(plan)                                                           # what `stitchsweep plan` prints
    results = sweep.run("quickstart", storage="results", num_cpus=2)      # a handle on RESULTS/<sweep>
    results.status()["complete"], results.load()["trials"], results.report("report/quickstart")
    sweep.resume("results/quickstart")                                    # after Ctrl+C, a crash, a fix

Errors in a space, a storage or an argument are `SpecError`s naming the field, what was expected and what was
found (the command line prints them and exits 2). Ctrl+C stops a run as on the command line (the running units
handed back, every finished unit recorded) and raises `KeyboardInterrupt`: `resume` finishes it. A Ray the caller
initialised is used as it is (`address` is then ignored); otherwise `address` joins a cluster, else a local node
with `num_cpus` CPUs starts and stops with the run.
"""

from sweep.api.inputs import open_results, open_storage, read_space
from sweep.api.planned import Plan, plan
from sweep.api.results import Results, report, status
from sweep.api.running import RunOptions, execute, resume, run, start

__all__ = [
    "Plan",
    "Results",
    "RunOptions",
    "execute",
    "open_results",
    "open_storage",
    "plan",
    "read_space",
    "report",
    "resume",
    "run",
    "start",
    "status",
]
