"""`stitchsweep` command line: plan, run, resume, status, report.

Bad input (a wrong search space, a path that is not a results directory) exits with code 2 and one line
that names the field, what was expected and what was found, before anything runs or is written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import yaml

from sweep.backends.lease import Lease
from sweep.cli.inputs import check_results, load_space, open_results, storage
from sweep.config.errors import SpecError
from sweep.config.generators import dump_space
from sweep.plan import planning
from sweep.plan.status import print_status, status_json

EXIT_INCOMPLETE = 1  # run/resume ended with failed or pending trials (all recorded; see `status`)
EXIT_INTERRUPTED = 130  # Ctrl+C (SIGINT): stopped after the running trials were handed back
EXIT_BAD_INPUT = 2


def cmd_plan(args) -> int:
    """A summary of what the space holds (`--trials`: every unit; `--json`: both, machine-readable); with
    `--storage`, also what that results root has recorded and what a run would do."""
    from sweep.plan import disk, memory
    from sweep.plan.estimate import load_profile, plan_estimate
    from sweep.registry import KINDS
    from sweep.store.results import SweepDir

    if args.estimate:  # a wrong --costs is said before the space is read
        load_profile(args.costs)
    sweep = load_space(args.space)
    if args.expand:  # the plain space: no includes, families, selections or generators
        print(dump_space(sweep.raw), end="")
        return 0
    units = {name: kind.units(sweep) for name, kind in KINDS.items()}
    todo, sweep_dir = None, None
    if args.storage is not None:
        sweep_dir = SweepDir(storage("--storage", args.storage), sweep.name)
        todo = planning.to_run(sweep, sweep_dir, retry_failed=False, dry=True) if sweep_dir.path.exists() else None
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
    _check_counts(args)
    _cache_settings(args)
    _prepare(sweep_dir, sweep)
    with Lease(sweep_dir):  # one driver per sweep
        return _execute_leased(sweep, sweep_dir, args, retry_failed)


def _execute_leased(sweep, sweep_dir, args, retry_failed: bool) -> int:
    from sweep.registry import KINDS
    from sweep.store.results import remove_stale_tmp

    stale = remove_stale_tmp(sweep_dir)
    if stale:
        print(f"removed {stale} partial file(s) left by an interrupted run")
    plan = planning.to_run(sweep, sweep_dir, retry_failed)
    counts = {k: len(KINDS[k].units(sweep)) for k in plan}
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
            planning.check_data(sweep)
        _cluster_auth(args.address)
        if args.address is None:
            from sweep.backends.node import begin_lean

            begin_lean(args.num_cpus)  # the embedded node starts while Tune is imported
        from sweep.backends import ray as ray_backend  # Ray and Tune are imported only where work is scheduled

        ray_backend.run_stages(
            sweep, sweep_dir, plan, address=args.address, num_cpus=args.num_cpus, max_concurrent=args.max_concurrent
        )
    complete = print_status(sweep, sweep_dir)
    _compact(sweep_dir.path)  # what earlier runs left loose (each stage compacts its own at its end)
    planning.write_manifest(sweep, sweep_dir)  # the next status reads only what changed since
    from analysis.reading import write_snapshot

    write_snapshot(sweep_dir.path)  # and the next report or analysis.load, only the parts that changed
    if complete and sweep_dir.ray.exists():  # Ray's records of interrupted runs: nothing left to debug
        try:
            sweep_dir.ray.delete_tree()
        except OSError as exc:
            print(f"note: could not remove Ray's run records at {sweep_dir.ray}: {exc}", flush=True)
    return 0 if complete else EXIT_INCOMPLETE


def cmd_run(args) -> int:
    from sweep.store.layout import SPACE_FILE
    from sweep.store.results import SweepDir

    if Path(args.space).is_dir() and (Path(args.space) / SPACE_FILE).is_file():
        raise SpecError(
            "SPACE", "a search-space file", args.space, f"a results directory: stitchsweep resume {args.space}"
        )
    sweep = load_space(args.space)
    storage("--storage", args.storage)
    sweep_dir = SweepDir(args.storage, sweep.name)
    _prepare(sweep_dir, sweep)
    # The sweep's own copy: `resume`, `status` and `report` read it. A grown space replaces it; trial ids
    # keep finished trials finished.
    sweep_dir.space.write_text(yaml.safe_dump(sweep.raw, sort_keys=False))
    return _execute(sweep, sweep_dir, args, retry_failed=args.failed)


def cmd_schema(args) -> int:
    """The JSON Schema of the search-space language (docs/search-spaces.md, "Editor support")."""
    from sweep.config.schema import space_schema

    print(json.dumps(space_schema(), indent=1))
    return 0


def cmd_resume(args) -> int:
    from sweep.plan import memory

    sweep, sweep_dir = open_results(args.results)
    memory.check(sweep)  # with resources.memory_per_trial: every unit's indices fit it
    return _execute(sweep, sweep_dir, args, retry_failed=args.failed)


# A results directory: its space (a sweep's folder holds only the tables of the kinds it ran), or a trials/ folder.
RESULTS_MARKERS = ("space.yaml", "trials")
RESULTS_EXPECTED = "a results directory with a space.yaml or a trials/ folder (made by `stitchsweep run`)"


def _compact(results) -> int:
    """Compact every table's done parts (`sweep.store.compact`), printing one line when there were any."""
    from sweep.store.compact import compact

    done = compact(results)
    parts, files = sum(p for p, _ in done.values()), sum(f for _, f in done.values())
    if parts:
        print(f"compacted {parts} parts into {files} file(s)", flush=True)
    return parts


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
    if args.json:
        doc = status_json(sweep, sweep_dir)
        print(json.dumps(doc, indent=2))
        complete = doc["complete"]
    else:
        complete = print_status(sweep, sweep_dir)
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


def _command(sub, name: str, fn, help: str, example: str, first: tuple[str, str]) -> argparse.ArgumentParser:
    """A subcommand with its help, an example and its positional argument."""
    p = sub.add_parser(name, help=help, epilog=f"example: stitchsweep {name} {example}")
    p.add_argument(first[0], help=first[1])
    p.set_defaults(fn=fn)
    return p


def _ray_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--address", default=None, help="Ray cluster to join (e.g. 'auto'); default: start an embedded local Ray"
    )
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of the embedded local Ray (default: all)")
    p.add_argument(
        "--max-concurrent",
        type=int,
        default=None,
        help="at most this many trials at once (default: as resources allow)",
    )
    p.add_argument("--failed", action="store_true", help="also rerun trials recorded as failed")
    p.add_argument(
        "--cache",
        choices=("on", "off"),
        default=None,
        help="the workers' cache of donors, data and frozen activations (default: on; results are the same)",
    )
    p.add_argument("--cache-mb", type=int, default=None, help="its memory budget per worker (default: 2048)")


SPACE = ("space", "a search-space YAML file")
RESULTS = ("results", "RESULTS directory, e.g. results/quickstart")


def build_parser() -> argparse.ArgumentParser:
    from sweep import __version__
    from sweep.cli.papers import add_figures

    parser = argparse.ArgumentParser(prog="stitchsweep", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"stitchsweep {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = _command(sub, "plan", cmd_plan, "validate a search space and summarise its work",
                 "search_spaces/quickstart.yaml --trials", SPACE)  # fmt: skip
    p.add_argument("--trials", action="store_true", help="list every unit of work (default: a summary)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON (summary and every unit)")
    p.add_argument("--expand", action="store_true", help="print the expanded space (plain YAML, runnable as is)")
    p.add_argument("--storage", default=None, help="also say what this results root has recorded and would run")
    p.add_argument("--estimate", action="store_true", help="predict the device time of what would run (cost model)")
    p.add_argument("--costs", default=None, help="--estimate: a profile file, or cpu-2core (default), nvidia-h200")
    p.add_argument("--workers", type=int, default=None, help="--estimate: units running at once (default: 1)")

    p = _command(sub, "run", cmd_run, "run a sweep (trials already recorded are skipped)",
                 "search_spaces/quickstart.yaml --storage results --num-cpus 2", SPACE)  # fmt: skip
    p.add_argument(
        "--storage", default="results", help="results root: a folder or a pyarrow.fs URI (default: ./results)"
    )
    _ray_options(p)

    p = _command(sub, "resume", cmd_resume, "finish an interrupted sweep from its results directory",
                 "results/quickstart --failed", RESULTS)  # fmt: skip
    _ray_options(p)

    p = _command(sub, "status", cmd_status,
                 "count done / failed / pending units; exit code 0 when the sweep is complete, 1 otherwise",
                 "results/quickstart --json", RESULTS)  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the counts and first failures as JSON")
    _command(sub, "compact", cmd_compact,
             "gather a sweep's done parts into at most 100 files per table (runs also do it after each stage)",
             "results/quickstart", RESULTS)  # fmt: skip

    p = sub.add_parser("report", help="write the HTML report and PNG charts of a sweep (or of a paper's items)",
                       epilog="example: stitchsweep report results/quickstart --out report/quickstart (a paper's page:"
                       " stitchsweep report results/jones_fmnist --paper jones-2022)")  # fmt: skip
    p.add_argument("results", nargs="+", help="RESULTS directory, e.g. results/quickstart (several with --paper)")
    p.set_defaults(fn=cmd_report)
    p.add_argument(
        "--paper",
        default=None,
        help="one page of this paper's items in its order (e.g. jones-2022; `stitchsweep figures` lists them)",
    )
    p.add_argument(
        "--out",
        default=None,
        help="output folder (default: ./report/<sweep>, or ./report/<paper>); it may hold its previous report",
    )
    add_figures(sub)
    p = sub.add_parser(
        "schema",
        help="print the JSON Schema of search spaces (for editors)",
        epilog="example: stitchsweep schema > stitchsweep-space.schema.json",
    )
    p.set_defaults(fn=cmd_schema)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except SpecError as exc:
        print(f"stitchsweep: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # e.g. `stitchsweep plan SPACE | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt as exc:
        where = getattr(args, "sweep_uri", None) or "RESULTS"
        print(
            f"stitchsweep: interrupted{f' ({exc})' if str(exc) else ''}; every finished trial is recorded."
            f" Finish with: stitchsweep resume {where}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
