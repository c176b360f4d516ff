"""The `stitchsweep` commands: each `cmd_*` takes the parsed arguments and returns the exit code."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

from sweep import api
from sweep.api.inputs import check_results
from sweep.api.running import compact_tables
from sweep.cli.inputs import load_space, open_results, storage
from sweep.config.errors import SpecError
from sweep.config.generators import dump_space
from sweep.planning.status import print_status, status_json

EXIT_INCOMPLETE = 1  # run/resume ended with failed or pending trials (all recorded; see `status`)
EXIT_INTERRUPTED = 130  # Ctrl+C (SIGINT): stopped after the running trials were handed back
# (SIGTERM: the same stop, exit code 143, `sweep.backends.kills.EXIT_TERMINATED`)
EXIT_BAD_INPUT = 2
EXIT_STORE_UNAVAILABLE = 4  # an object store kept failing past the store's retries: resume when it answers
EXIT_DISK_FULL = 3  # a write found no room (`DiskFull`: ENOSPC, a quota): stopped, no partial file read as a
# result, every finished unit recorded once; free space in the folder it names, then `stitchsweep resume`


def stops_on_disk_full(then: str):
    """A command that ends in one line and EXIT_DISK_FULL when a write found no room, its own or a Ray worker's
    (a `DiskFull` raised by the store's writers, however wrapped); `then`: the command to run once space is
    freed (`{where}`: the results)."""

    def wrap(cmd):
        @functools.wraps(cmd)
        def run(args) -> int:
            from sweep.store.retry import StoreUnavailable
            from sweep.store.storage import disk_full_in

            where = lambda: getattr(args, "sweep_uri", None) or getattr(args, "results", None) or "RESULTS"  # noqa: E731
            try:
                return cmd(args)
            except StoreUnavailable as exc:
                print(
                    f"stitchsweep: error: object store unavailable: {exc}; every finished unit is recorded. When it"
                    f" answers again: {then.format(where=where())}",
                    file=sys.stderr,
                )
                return EXIT_STORE_UNAVAILABLE
            except Exception as exc:
                full = disk_full_in(exc)
                if full is None:
                    raise
            where = where()
            print(
                f"stitchsweep: error: disk full: {full}; every finished unit is recorded and no partial file is"
                f" read as a result. Free space there, then: {then.format(where=where)}",
                file=sys.stderr,
            )
            return EXIT_DISK_FULL

        return run

    return wrap


def cmd_plan(args) -> int:
    """A summary of what the space holds (`--trials`: every unit; `--json`: both, machine-readable); with
    `--storage`, also what that results root has recorded and what a run would do (`sweep.api.plan`)."""
    if args.expand:  # the plain space: no includes, families, selections or generators
        print(dump_space(load_space(args.space, args.overrides, args.plugin).raw), end="")
        return 0
    plan = api.plan(
        args.space, overrides=args.overrides, only=args.only, plugins=args.plugin, storage=args.storage,
        estimate=args.estimate, costs=args.costs, workers=args.workers, full=args.trials, address=args.address,
    )  # fmt: skip
    if args.json:
        print(json.dumps(plan.json(), indent=2))
    else:
        print(plan)
    return 0


@stops_on_disk_full("stitchsweep resume {where}")
def cmd_run(args) -> int:
    sweep, sweep_dir = api.start(
        args.space, args.storage, overrides=args.overrides, plugins=args.plugin, cache=args.cache,
        cache_mb=args.cache_mb,
    )  # fmt: skip
    args.sweep_uri = sweep_dir.uri  # for the hints of Ctrl+C and a full disk
    return 0 if api.execute(sweep, sweep_dir, api.RunOptions.of(args)) else EXIT_INCOMPLETE


def cmd_schema(args) -> int:
    """The JSON Schema of the search-space language (docs/search-spaces.md, "Editor support")."""
    from sweep.config.schema import space_schema

    print(json.dumps(space_schema(), indent=1))
    return 0


@stops_on_disk_full("stitchsweep resume {where}")
def cmd_resume(args) -> int:
    from sweep.planning import memory

    sweep, sweep_dir = open_results(args.results)
    args.sweep_uri = sweep_dir.uri
    memory.check(sweep)  # with resources.memory_per_trial: every unit's indices fit it
    return 0 if api.execute(sweep, sweep_dir, api.RunOptions.of(args)) else EXIT_INCOMPLETE


# A results directory: its space (a sweep's folder holds only the tables of the kinds it ran), or a trials/ folder.
RESULTS_MARKERS = ("space.yaml", "trials")
RESULTS_EXPECTED = "a results directory with a space.yaml or a trials/ folder (made by `stitchsweep run`)"


@stops_on_disk_full("stitchsweep compact {where}")
def cmd_compact(args) -> int:
    """Compact an existing sweep's parts (the engine does it at the end of every stage)."""
    p = storage("RESULTS", args.results)
    check_results(p, args.results, RESULTS_MARKERS, RESULTS_EXPECTED)
    if (p / "driver.lease").exists():
        print("note: a driver holds this sweep's lease; compaction is safe beside it only between its stages")
    compact_tables(p)
    return 0


def cmd_status(args) -> int:
    """Counts per kind of work; exit code 0 when every unit is done, EXIT_INCOMPLETE otherwise (for scripts)."""
    sweep, sweep_dir = open_results(args.results)
    chosen = api.planned.selection(sweep, args.only)
    if args.json:
        doc = status_json(sweep, sweep_dir, chosen)
        print(json.dumps(doc, indent=2))
        complete = doc["complete"]
    else:
        complete = print_status(sweep, sweep_dir, chosen)
    return 0 if complete else EXIT_INCOMPLETE


def cmd_report(args) -> int:

    if args.paper:  # one page of a paper's items, from every results folder given
        from sweep.cli.papers import paper_report

        roots = [storage("RESULTS", path) for path in args.results]
        for p, path in zip(roots, args.results, strict=True):
            check_results(p, path, RESULTS_MARKERS, RESULTS_EXPECTED)
        folder, write = paper_report(args.paper, roots, args.out)
        return _write_report(folder, write, "this paper's previous report")
    if len(args.results) != 1:
        raise SpecError("RESULTS", "one results directory (several only with --paper)", " ".join(args.results))
    args.results = args.results[0]
    print(f"report: {api.report(args.results, args.out)}")
    return 0


def _write_report(out: Path, write, previous: str) -> int:
    """`write(out)` a report into `out`, refused (exit 2, naming --out) when the folder holds something else."""
    from analysis.report.page import ReportFolderError

    try:
        index = write(out)
    except ReportFolderError as exc:
        raise SpecError("--out", f"an empty folder, or {previous}", str(out), str(exc)) from None
    print(f"report: {index}")
    return 0
