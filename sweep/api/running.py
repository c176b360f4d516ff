"""`sweep.run`, `sweep.resume`: a sweep run from Python, and what the command line's `run` and `resume` call
(one implementation)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from sweep.api.cluster import cluster_auth
from sweep.api.inputs import open_results, open_storage, read_space
from sweep.api.planned import selection
from sweep.api.results import Results
from sweep.config.errors import SpecError


@dataclass
class RunOptions:
    """How a run runs (the command line's `--num-cpus`, `--address`, ...): the same for `run` and `resume`."""

    num_cpus: int | None = None
    address: str | None = None
    max_concurrent: int | None = None
    failed: bool = False  # also run the units recorded as failed
    only: list[str] | None = None  # selections (`field=glob`): only these units, and the donors they read
    rerun: list[str] | None = None  # selections whose recorded units are set aside and run again
    tracker: list[str] | None = None  # mlflow:URI, wandb:PROJECT
    cache: str | None = None  # "on" | "off": the workers' cache
    cache_mb: int | None = None

    @classmethod
    def of(cls, args) -> RunOptions:
        """The options of parsed command-line arguments (those it does not have: the defaults)."""
        names = cls.__dataclass_fields__
        return cls(**{n: getattr(args, n) for n in names if getattr(args, n, None) is not None})


def start(space, storage="results", *, overrides=(), plugins=(), cache=None, cache_mb=None):
    """What `run` does before anything runs: the space read and checked, the storage opened and writable, the
    sweep's folder made and its own copy of the space (and of its plugins) kept there. Returns (sweep, SweepDir)."""
    import yaml

    from sweep.config.plugins import keep_plugins
    from sweep.store.results import SweepDir

    if isinstance(space, (str, os.PathLike)) and "\n" not in str(space):
        from sweep.store.layout import SPACE_FILE

        if Path(space).is_dir() and (Path(space) / SPACE_FILE).is_file():
            raise SpecError("SPACE", "a search-space file", str(space), f"a results directory: resume {space}")
    sweep = read_space(space, overrides, plugins)
    open_storage(storage, "--storage")
    cache_settings(cache, cache_mb)  # a refused cache folder stops the run before anything is written
    sweep_dir = SweepDir(str(storage), sweep.name)
    prepare(sweep_dir, sweep)
    # The sweep's own copy: `resume`, `status` and `report` read it. A grown space replaces it; unit ids keep
    # finished units finished. Its plugins are copies kept with it (`sweep.config.plugins`).
    sweep_dir.space.write_text(yaml.safe_dump(keep_plugins(sweep, sweep_dir), sort_keys=False))
    return sweep, sweep_dir


def prepare(sweep_dir, sweep) -> None:
    """Refuse storage this user cannot write, then make the sweep's folder and its kinds' tables (only the
    kinds its space has units of)."""
    from sweep.registry import KINDS
    from sweep.store.results import writable_or_error

    problem = writable_or_error(sweep_dir.path)
    if problem:
        raise SpecError("--storage", "storage this user can write", str(sweep_dir.root), problem)
    sweep_dir.create([k.table for k in KINDS.values() if k.schema is not None and k.units(sweep)])


def check_counts(opts: RunOptions) -> None:
    """num_cpus and max_concurrent, when given, are whole numbers >= 1 (refused before Ray starts)."""
    for flag, value in (("--num-cpus", opts.num_cpus), ("--max-concurrent", opts.max_concurrent)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise SpecError(flag, "a whole number >= 1", value)


def cache_settings(cache: str | None, cache_mb: int | None) -> None:
    """`cache` / `cache_mb` set the workers' cache (`sweep.worker.cache`) through its environment variables, which
    the backend hands to every worker; a bad variable is refused here, before Ray starts."""
    from sweep.worker import cache as worker_cache

    if cache is not None:
        if cache not in ("on", "off"):
            raise SpecError("--cache", "on or off", cache)
        os.environ[worker_cache.SWITCH_ENV] = cache
    if cache_mb is not None:
        if cache_mb < 0:
            raise SpecError("--cache-mb", "a whole number of megabytes >= 0", cache_mb)
        os.environ[worker_cache.BUDGET_ENV] = str(cache_mb)
    worker_cache.Settings.from_env()  # a bad variable is a SpecError naming it


def execute(sweep, sweep_dir, opts: RunOptions) -> bool:
    """Run what `sweep` has not recorded in `sweep_dir`, holding the sweep's lease (one driver per sweep): the
    stale parts set aside, the selection's units (`opts.only`, `opts.rerun`), the stages on Ray, then its status
    printed, its tables compacted and its manifest and snapshot written. Returns whether every unit is done."""
    from sweep.backends import trackers
    from sweep.backends.kills import at_forced_exit
    from sweep.backends.lease import Lease
    from sweep.worker.cache import record_in

    check_counts(opts)
    cache_settings(opts.cache, opts.cache_mb)
    record_in(sweep_dir)  # workers list the node-cache files they use in RESULTS/<sweep>/_cache_keys/
    tracking = trackers.parse(opts.tracker or (), sweep.name)  # a bad one is refused before anything runs
    prepare(sweep_dir, sweep)
    with Lease(sweep_dir) as lease:
        at_forced_exit(lambda: lease.__exit__(None, None, None))  # SIGTERM's grace ran out: free it all the same
        return _execute_leased(sweep, sweep_dir, opts, tracking)


def _execute_leased(sweep, sweep_dir, opts: RunOptions, tracking) -> bool:
    from sweep.backends.progress import phase
    from sweep.planning import planning
    from sweep.planning.current import retire_lines, retire_stale
    from sweep.planning.status import print_status
    from sweep.registry import KINDS
    from sweep.store.results import remove_stale_tmp

    stale = remove_stale_tmp(sweep_dir)
    if stale:
        print(f"removed {stale} partial file(s) left by an interrupted run")
    for line in retire_lines(*retire_stale(sweep, sweep_dir)):  # the tables hold the space's units only
        print(line, flush=True)
    chosen = run_selection(sweep, sweep_dir, opts)
    todo = planning.to_run(sweep, sweep_dir, opts.failed, only=chosen)
    counts = {k: len(KINDS[k].units(sweep)) if chosen is None else len(chosen[k]) for k in todo}
    summary = [
        f"{n} {KINDS[k].noun}, {n - len(todo[k])} already recorded, {len(todo[k])} to run"
        for k, n in counts.items()
        if n
    ]
    print(f"sweep {sweep.name}: " + "; ".join(summary), flush=True)
    print(f"results: {sweep_dir.uri}", flush=True)
    if any(todo.values()):
        if opts.address is None:  # an embedded Ray's workers read the driver's data root
            phase("checking the datasets on this machine")
            planning.check_data(sweep)
        cluster_auth(opts.address)
        ray = sys.modules.get("ray")  # a Ray this process initialised (a notebook's): used as it is
        if ray is not None and ray.is_initialized():
            phase("using the Ray this process initialised, and importing Tune")
        elif opts.address is None:
            from sweep.backends.node import begin_lean

            phase("starting Ray (a local node) and importing Tune")
            begin_lean(opts.num_cpus)  # the embedded node starts while Tune is imported (a Ray already up: used)
        else:
            phase(f"joining the Ray cluster at {opts.address} and importing Tune")
        from sweep.backends import ray as ray_backend  # Ray and Tune are imported only where work is scheduled

        ray_backend.run_stages(
            sweep,
            sweep_dir,
            todo,
            address=opts.address,
            num_cpus=opts.num_cpus,
            max_concurrent=opts.max_concurrent,
            trackers=tracking,
        )
    return _finish(sweep, sweep_dir, print_status(sweep, sweep_dir))


def _finish(sweep, sweep_dir, complete: bool) -> bool:
    from sweep.planning import planning
    from sweep.store.snapshot import write_snapshot

    compact_tables(sweep_dir.path, automatic=True)  # tables over `compact_above()` files (each stage does it too)
    planning.write_manifest(sweep, sweep_dir)  # the next status reads only what changed since
    write_snapshot(sweep_dir.path)  # and the next report or analysis.load, only the parts that changed
    if complete and sweep_dir.ray.exists():  # Ray's records of interrupted runs: nothing left to debug
        try:
            sweep_dir.ray.delete_tree()
        except OSError as exc:
            print(f"note: could not remove Ray's run records at {sweep_dir.ray}: {exc}", flush=True)
    return complete


def compact_tables(results, automatic: bool = False) -> int:
    """Compact every table's done parts (`sweep.store.compact`; `automatic`, at the end of a run: only the
    tables over `compact_above()` files), printing one line when there were any."""
    from sweep.store.compact import compact, compact_above

    done = compact(results, above=compact_above() if automatic else 0)
    parts, files = sum(p for p, _ in done.values()), sum(f for _, f in done.values())
    if parts:
        print(f"compacted {parts} parts into {files} file(s)", flush=True)
    return parts


def run_selection(sweep, sweep_dir, opts) -> dict[str, set[str]] | None:
    """What `only` / `rerun` restrict the run to (with the donors those units read), None for all; `rerun`'s
    units have their parts set aside first (`sweep.store.aside`), so that they run again."""
    from sweep.planning.selection import with_donors
    from sweep.store.aside import set_aside_units

    only, rerun = getattr(opts, "only", None), getattr(opts, "rerun", None)
    if not only and not rerun:
        return None
    chosen = selection(sweep, only) or {}
    again = selection(sweep, rerun, "--rerun") or {}
    if rerun:
        folder, moved = set_aside_units(sweep, sweep_dir, again)
        print(f"--rerun: set aside {moved} part(s) of {sum(map(len, again.values()))} unit(s) in {folder}", flush=True)
    merged = {k: chosen.get(k, set()) | again.get(k, set()) for k in {*chosen, *again}}
    return with_donors(sweep, merged)


def run(space, *, storage="results", overrides=(), plugins=(), **options) -> Results:
    """Run `space` (see `read_space`) into `storage` (a folder or a pyarrow.fs URI): every unit not recorded
    there yet. `options`: those of `RunOptions` (`num_cpus`, `address`, `max_concurrent`, `failed`, `only`,
    `rerun`, `tracker`, `cache`, `cache_mb`). Returns the results' handle (`Results`)."""
    opts = RunOptions(**_listed(options))
    sweep, sweep_dir = start(space, storage, overrides=overrides, plugins=plugins, cache=opts.cache,
                             cache_mb=opts.cache_mb)  # fmt: skip
    execute(sweep, sweep_dir, opts)
    return Results(sweep_dir.uri)


def resume(results, **options) -> Results:
    """Run what the sweep at `results` (`RESULTS/<sweep>`) has not recorded yet, with the space it kept: after
    Ctrl+C, a crash, a lost node or a fixed plugin (`failed=True` reruns the failed units too)."""
    from sweep.planning import memory

    opts = RunOptions(**_listed(options))
    sweep, sweep_dir = open_results(results)
    memory.check(sweep)  # with resources.memory_per_trial: every unit's indices fit it
    execute(sweep, sweep_dir, opts)
    return Results(sweep_dir.uri)


def _listed(options: dict) -> dict:
    unknown = sorted(set(options) - set(RunOptions.__dataclass_fields__))
    if unknown:
        options = list(RunOptions.__dataclass_fields__)
        raise TypeError(f"unexpected keyword argument(s) {unknown}; the options are {options}")
    for name in ("only", "rerun", "tracker"):  # one string: a list of one
        if isinstance(options.get(name), str):
            options[name] = [options[name]]
    return options
