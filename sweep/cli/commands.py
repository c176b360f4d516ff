"""The `stitchsweep` commands: each `cmd_*` takes the parsed arguments and returns the exit code."""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import yaml

from sweep.backends.kills import at_forced_exit
from sweep.backends.lease import Lease
from sweep.backends.progress import phase
from sweep.cli.inputs import check_results, load_space, open_results, storage
from sweep.cli.subsets import run_selection, selected
from sweep.config.errors import SpecError
from sweep.config.generators import dump_space
from sweep.config.plugins import keep_plugins
from sweep.plan import planning
from sweep.plan.status import print_status, status_json

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
    `--storage`, also what that results root has recorded and what a run would do."""
    from sweep.plan import disk, memory, versions
    from sweep.plan.estimate import load_profile, plan_estimate
    from sweep.registry import KINDS
    from sweep.store.results import SweepDir

    if args.estimate:  # a wrong --costs is said before the space is read
        load_profile(args.costs)
    sweep = load_space(args.space, args.overrides, args.plugin)
    if args.expand:  # the plain space: no includes, families, selections or generators
        print(dump_space(sweep.raw), end="")
        return 0
    chosen = selected(sweep, args.only)
    if chosen is not None:  # what `run --only` runs: the selected units and the donors they read
        from sweep.plan.selection import with_donors

        chosen = with_donors(sweep, chosen)
    units = {name: kind.units(sweep) for name, kind in KINDS.items()}
    if chosen is not None:
        units = {name: {u: unit for u, unit in us.items() if u in chosen[name]} for name, us in units.items()}
    todo, sweep_dir = None, None
    if args.storage is not None:
        sweep_dir = SweepDir(storage("--storage", args.storage), sweep.name)
        exists = sweep_dir.path.exists()
        todo = planning.to_run(sweep, sweep_dir, retry_failed=False, dry=True, only=chosen) if exists else None
        disk.check_room(sweep, todo, sweep_dir)
    if args.json:
        print(json.dumps(planning.plan_json(sweep, units, todo), indent=2))
        return 0
    print(f"sweep {sweep.name}: " + ", ".join(f"{len(u)} {KINDS[k].noun}" for k, u in units.items() if u))
    lines = [*sweep.generated, *planning.plan_lines(sweep, units, full=args.trials), *memory.plan_lines(sweep)]
    lines += disk.plan_lines(sweep, todo)
    print("\n".join(f"  {line}" for line in lines))
    if args.storage is not None:
        for name, u in units.items():
            if u:
                left = len(u) if todo is None else len(todo.get(name, ()))
                print(f"{KINDS[name].noun} under {args.storage}: {len(u) - left} recorded, {left} would run")
        for line in versions.plan_lines(sweep, sweep_dir, todo) if todo is not None else ():
            print(line)
    if args.estimate:
        known = sweep_dir if todo is not None else None
        print("\n".join(plan_estimate(sweep, units, todo, known, args.costs, args.workers)))
    return 0


def _cluster_auth(address: str | None) -> None:
    """Joining a cluster: present its token when one is at hand. Ray 2.60's `ray start --head` turns token
    authentication on, but a connecting driver only sends the token with RAY_AUTH_MODE=token (which also
    works against a cluster without authentication). Must run before Ray is imported."""
    if not address or "RAY_AUTH_MODE" in os.environ:
        return
    token_file = Path(os.environ.get("RAY_AUTH_TOKEN_PATH", "~/.ray/auth_token")).expanduser()
    if os.environ.get("RAY_AUTH_TOKEN") or token_file.is_file():
        os.environ["RAY_AUTH_MODE"] = "token"


def _prepare(sweep_dir, sweep) -> None:
    """Refuse storage this user cannot write, then make the sweep's folder and its kinds' tables (only the
    kinds its space has units of)."""
    from sweep.registry import KINDS
    from sweep.store.results import writable_or_error

    problem = writable_or_error(sweep_dir.path)
    if problem:
        raise SpecError("--storage", "storage this user can write", str(sweep_dir.root), problem)
    sweep_dir.create([k.table for k in KINDS.values() if k.schema is not None and k.units(sweep)])


def _check_counts(args) -> None:
    """--num-cpus and --max-concurrent, when given, are whole numbers >= 1 (refused before Ray starts)."""
    for flag, value in (("--num-cpus", args.num_cpus), ("--max-concurrent", args.max_concurrent)):
        if value is not None and value < 1:
            raise SpecError(flag, "a whole number >= 1", value)


def _cache_settings(args) -> None:
    """--cache / --cache-mb set the workers' cache (`sweep.worker.cache`) through its environment variables, which
    the backend hands to every worker; a bad variable is refused here, before Ray starts."""
    from sweep.worker import cache

    if args.cache is not None:
        os.environ[cache.SWITCH_ENV] = args.cache
    if args.cache_mb is not None:
        if args.cache_mb < 0:
            raise SpecError("--cache-mb", "a whole number of megabytes >= 0", args.cache_mb)
        os.environ[cache.BUDGET_ENV] = str(args.cache_mb)
    cache.Settings.from_env()  # a bad variable is a SpecError naming it


def _execute(sweep, sweep_dir, args, retry_failed: bool) -> int:
    from sweep.backends import trackers

    _check_counts(args)
    _cache_settings(args)
    from sweep.worker.cache import record_in

    record_in(sweep_dir)  # workers list the node-cache files they use in RESULTS/<sweep>/_cache_keys/
    args.trackers = trackers.parse(args.tracker or (), sweep.name)  # a bad one is refused before anything runs
    _prepare(sweep_dir, sweep)
    with Lease(sweep_dir) as lease:  # one driver per sweep
        at_forced_exit(lambda: lease.__exit__(None, None, None))  # SIGTERM's grace ran out: free it all the same
        return _execute_leased(sweep, sweep_dir, args, retry_failed)


def _execute_leased(sweep, sweep_dir, args, retry_failed: bool) -> int:
    from sweep.plan.current import retire_lines, retire_stale
    from sweep.registry import KINDS
    from sweep.store.results import remove_stale_tmp

    stale = remove_stale_tmp(sweep_dir)
    if stale:
        print(f"removed {stale} partial file(s) left by an interrupted run")
    for line in retire_lines(*retire_stale(sweep, sweep_dir)):  # the tables hold the space's units only
        print(line, flush=True)
    chosen = run_selection(sweep, sweep_dir, args)
    plan = planning.to_run(sweep, sweep_dir, retry_failed, only=chosen)
    counts = {k: len(KINDS[k].units(sweep)) if chosen is None else len(chosen[k]) for k in plan}
    summary = [
        f"{n} {KINDS[k].noun}, {n - len(plan[k])} already recorded, {len(plan[k])} to run"
        for k, n in counts.items()
        if n
    ]
    print(f"sweep {sweep.name}: " + "; ".join(summary), flush=True)
    print(f"results: {sweep_dir.uri}", flush=True)
    args.sweep_uri = sweep_dir.uri  # for the Ctrl+C hint
    if any(plan.values()):
        if args.address is None:  # an embedded Ray's workers read the driver's data root
            phase("checking the datasets on this machine")
            planning.check_data(sweep)
        _cluster_auth(args.address)
        if args.address is None:
            from sweep.backends.node import begin_lean

            phase("starting Ray (a local node) and importing Tune")
            begin_lean(args.num_cpus)  # the embedded node starts while Tune is imported
        else:
            phase(f"joining the Ray cluster at {args.address} and importing Tune")
        from sweep.backends import ray as ray_backend  # Ray and Tune are imported only where work is scheduled

        ray_backend.run_stages(
            sweep,
            sweep_dir,
            plan,
            address=args.address,
            num_cpus=args.num_cpus,
            max_concurrent=args.max_concurrent,
            trackers=args.trackers,
        )
    complete = print_status(sweep, sweep_dir)
    _compact(sweep_dir.path, automatic=True)  # tables left over `compact_above()` files (each stage does it too)
    planning.write_manifest(sweep, sweep_dir)  # the next status reads only what changed since
    from analysis.reading import write_snapshot

    write_snapshot(sweep_dir.path)  # and the next report or analysis.load, only the parts that changed
    if complete and sweep_dir.ray.exists():  # Ray's records of interrupted runs: nothing left to debug
        try:
            sweep_dir.ray.delete_tree()
        except OSError as exc:
            print(f"note: could not remove Ray's run records at {sweep_dir.ray}: {exc}", flush=True)
    return 0 if complete else EXIT_INCOMPLETE


@stops_on_disk_full("stitchsweep resume {where}")
def cmd_run(args) -> int:
    from sweep.store.layout import SPACE_FILE
    from sweep.store.results import SweepDir

    if Path(args.space).is_dir() and (Path(args.space) / SPACE_FILE).is_file():
        raise SpecError(
            "SPACE", "a search-space file", args.space, f"a results directory: stitchsweep resume {args.space}"
        )
    sweep = load_space(args.space, args.overrides, args.plugin)
    storage("--storage", args.storage)
    _cache_settings(args)  # a refused cache folder stops the command before anything is written
    sweep_dir = SweepDir(args.storage, sweep.name)
    args.sweep_uri = sweep_dir.uri  # for the hints of Ctrl+C and a full disk
    _prepare(sweep_dir, sweep)
    # The sweep's own copy: `resume`, `status` and `report` read it. A grown space replaces it; trial ids
    # keep finished trials finished. Its plugins are copies kept with it (`sweep.config.plugins`).
    sweep_dir.space.write_text(yaml.safe_dump(keep_plugins(sweep, sweep_dir), sort_keys=False))
    return _execute(sweep, sweep_dir, args, retry_failed=args.failed)


def cmd_schema(args) -> int:
    """The JSON Schema of the search-space language (docs/search-spaces.md, "Editor support")."""
    from sweep.config.schema import space_schema

    print(json.dumps(space_schema(), indent=1))
    return 0


@stops_on_disk_full("stitchsweep resume {where}")
def cmd_resume(args) -> int:
    from sweep.plan import memory

    sweep, sweep_dir = open_results(args.results)
    memory.check(sweep)  # with resources.memory_per_trial: every unit's indices fit it
    return _execute(sweep, sweep_dir, args, retry_failed=args.failed)


# A results directory: its space (a sweep's folder holds only the tables of the kinds it ran), or a trials/ folder.
RESULTS_MARKERS = ("space.yaml", "trials")
RESULTS_EXPECTED = "a results directory with a space.yaml or a trials/ folder (made by `stitchsweep run`)"


def _compact(results, automatic: bool = False) -> int:
    """Compact every table's done parts (`sweep.store.compact`; `automatic`, at the end of a run: only the
    tables over `compact_above()` files), printing one line when there were any."""
    from sweep.store.compact import compact, compact_above

    done = compact(results, above=compact_above() if automatic else 0)
    parts, files = sum(p for p, _ in done.values()), sum(f for _, f in done.values())
    if parts:
        print(f"compacted {parts} parts into {files} file(s)", flush=True)
    return parts


@stops_on_disk_full("stitchsweep compact {where}")
def cmd_compact(args) -> int:
    """Compact an existing sweep's parts (the engine does it at the end of every stage)."""
    p = storage("RESULTS", args.results)
    check_results(p, args.results, RESULTS_MARKERS, RESULTS_EXPECTED)
    if (p / "driver.lease").exists():
        print("note: a driver holds this sweep's lease; compaction is safe beside it only between its stages")
    _compact(p)
    return 0


def cmd_status(args) -> int:
    """Counts per kind of work; exit code 0 when every unit is done, EXIT_INCOMPLETE otherwise (for scripts)."""
    sweep, sweep_dir = open_results(args.results)
    chosen = selected(sweep, args.only)
    if args.json:
        doc = status_json(sweep, sweep_dir, chosen)
        print(json.dumps(doc, indent=2))
        complete = doc["complete"]
    else:
        complete = print_status(sweep, sweep_dir, chosen)
    return 0 if complete else EXIT_INCOMPLETE


def cmd_report(args) -> int:
    from analysis.report.write import write_report
    from sweep.registry import KINDS
    from sweep.store.layout import SPACE_FILE

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
    p = storage("RESULTS", args.results)
    check_results(p, args.results, RESULTS_MARKERS, RESULTS_EXPECTED)
    expected = None
    if (p / SPACE_FILE).exists():  # the header's counts and which trials are still in the space
        sweep, sweep_dir = open_results(args.results)
        doc = status_json(sweep, sweep_dir)
        kinds = {k: dict(v, blocked=len(v["blocked"])) for k, v in doc["kinds"].items()}
        expected = {"kinds": kinds, "trial_ids": list(KINDS["trial"].units(sweep))}
    out = Path(args.out) if args.out else Path("report") / p.name
    return _write_report(out, lambda folder: write_report(p, folder, expected), "this sweep's previous report")


def _write_report(out: Path, write, previous: str) -> int:
    """`write(out)` a report into `out`, refused (exit 2, naming --out) when the folder holds something else."""
    from analysis.report.page import ReportFolderError

    try:
        index = write(out)
    except ReportFolderError as exc:
        raise SpecError("--out", f"an empty folder, or {previous}", str(out), str(exc)) from None
    print(f"report: {index}")
    return 0
