"""`stitchsweep` command line: plan, run, resume, status, report.

Bad input (a wrong search space, a path that is not a results directory) exits with code 2 and one line
that names the field, what was expected and what was found, before anything runs or is written.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

from sweep import planning
from sweep.config.errors import SpecError

EXIT_INCOMPLETE = 1  # run/resume ended with failed or pending trials (all recorded; see `status`)
EXIT_INTERRUPTED = 130  # Ctrl+C (SIGINT): stopped after the running trials were handed back
EXIT_BAD_INPUT = 2


def _load_space(path: str):
    from sweep.config.space import load_space

    return load_space(path)


def _storage(field: str, where: str):
    """Open a local folder or pyarrow.fs URI, turning a bad one into a SpecError naming `field`."""
    from analysis.store.storage import StorageError, open_root

    try:
        return open_root(where)
    except StorageError as exc:
        raise SpecError(
            field, "a local folder or a pyarrow.fs URI (s3://bucket/prefix, gs://bucket/prefix, ...)", where, str(exc)
        ) from None


def _check_results(p, path: str, marker: str, expected: str) -> None:
    """Refuse a RESULTS argument without `marker` inside, suggesting the sweep folders below it."""
    from analysis.store.schema import SPACE_FILE

    try:
        ok = (p / marker).exists()
        inside = [] if ok else [q for q in p.glob("*") if (q / SPACE_FILE).is_file()]
    except OSError as exc:
        raise SpecError("RESULTS", expected, path, f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    if not ok:
        hint = f"did you mean {', '.join(str(q) for q in inside)}?" if inside else ""
        raise SpecError("RESULTS", expected, path, hint)


def _open_results(path: str):
    """A results directory is `<root>/<sweep>` holding the `space.yaml` that `run` copied there."""
    from analysis.store.schema import SPACE_FILE
    from sweep.config.space import load_space
    from sweep.results import SweepDir

    p = _storage("RESULTS", path)
    _check_results(p, path, SPACE_FILE, f"a results directory holding {SPACE_FILE} (made by `stitchsweep run`)")
    sweep = load_space(p / SPACE_FILE)
    return sweep, SweepDir(p.parent, p.name, uri=path)


def cmd_plan(args) -> int:
    sweep = _load_space(args.space)
    print(
        f"sweep {sweep.name}: {len(sweep.trials)} trials, {len(sweep.donors)} donors"
        + (f", {len(sweep.reptests)} representation-test units" if sweep.reptests else "")
    )
    for _name, d in sweep.donors.items():
        if d.source != "zoo":
            origin = d.path if d.source == "file" else f"RobustBench {d.robustbench_id} in {d.path}"
            print(f"  donor {d.ref}: {d.arch} from {origin} key={d.donor_key}")
            continue
        extra = f" eps={d.eps:g} step={d.step_size:g} steps={d.steps}" if d.training != "plain" else ""
        extra += f" beta={d.beta:g}" if d.beta is not None else ""
        data = d.data
        print(
            f"  donor {d.ref}: {d.arch} {d.training} on {data.dataset} (train_size={data.train_size})"
            f" epochs={d.epochs} seed={d.seed}{extra} key={d.donor_key}"
        )
    for s in sweep.trials:
        print(f"  {s.trial_id}  {s.label}")
    if sweep.reptests:
        print(f"representation tests: {len(sweep.reptests)} units")
        for u in sweep.reptests:
            print(f"  {u.unit_id}  {u.label}")
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


def _execute(sweep, sweep_dir, args, retry_failed: bool) -> int:
    from sweep.results import remove_stale_tmp, writable_or_error

    problem = writable_or_error(sweep_dir.path)
    if problem:
        raise SpecError("--storage", "storage this user can write", str(sweep_dir.root), problem)
    sweep_dir.create()
    stale = remove_stale_tmp(sweep_dir)
    if stale:
        print(f"removed {stale} partial file(s) left by an interrupted run")
    donors, todo, done = planning.pending(sweep, sweep_dir, retry_failed)
    units = planning.pending_units(sweep, sweep_dir, retry_failed)
    print(
        f"sweep {sweep.name}: {len(sweep.trials)} trials, {done} already recorded, {len(todo)} to run;"
        f" {len(donors)} of {len(sweep.donors)} donors to train or evaluate"
        + (f"; {len(units)} of {len(sweep.reptests)} representation-test units to run" if sweep.reptests else ""),
        flush=True,
    )
    print(f"results: {sweep_dir.uri}", flush=True)
    args.sweep_uri = sweep_dir.uri  # for the Ctrl+C hint
    if donors or todo or units:
        _cluster_auth(args.address)
        from sweep.backends import ray as ray_backend  # the only Ray import, only where work is scheduled

        ray_backend.run_stages(
            sweep,
            sweep_dir,
            donors,
            todo,
            units,
            address=args.address,
            num_cpus=args.num_cpus,
            max_concurrent=args.max_concurrent,
        )
    complete = _print_status(sweep, sweep_dir)
    return 0 if complete else EXIT_INCOMPLETE


def cmd_run(args) -> int:
    from sweep.results import SweepDir, writable_or_error

    sweep = _load_space(args.space)
    _storage("--storage", args.storage)
    sweep_dir = SweepDir(args.storage, sweep.name)
    problem = writable_or_error(sweep_dir.path)
    if problem:
        raise SpecError("--storage", "storage this user can write", str(sweep_dir.root), problem)
    sweep_dir.create()
    # The sweep's own copy: `resume`, `status` and `report` read it. A grown space replaces it; trial ids
    # keep finished trials finished.
    sweep_dir.space.write_text(yaml.safe_dump(sweep.raw, sort_keys=False))
    return _execute(sweep, sweep_dir, args, retry_failed=args.failed)


def cmd_resume(args) -> int:
    sweep, sweep_dir = _open_results(args.results)
    return _execute(sweep, sweep_dir, args, retry_failed=args.failed)


def _print_status(sweep, sweep_dir) -> bool:
    """Print done / failed / pending counts; True when every trial is done."""
    import pandas as pd

    import analysis

    trials = analysis.load_trials(sweep_dir.path)
    ids = {s.trial_id for s in sweep.trials}
    trials = trials[trials["trial_id"].isin(ids)]
    n_done = int((trials["status"] == "done").sum())
    failed = trials[trials["status"] == "failed"]
    pending = len(ids) - len(trials)
    print(f"sweep {sweep.name}: {len(ids)} trials: {n_done} done, {len(failed)} failed, {pending} pending")
    for _, r in failed.head(20).iterrows():
        print(f"  failed {r['trial_id']} {r['front']}->{r['end']} @{r['front_point']} {r['objective']}: {r['error']}")
    if len(failed) > 20:
        print(f"  ... and {len(failed) - 20} more failed (see the trials table)")
    if sweep.reptests:
        reps = analysis.load_reptests(sweep_dir.path)
        units = {u.unit_id for u in sweep.reptests}
        reps = reps[reps["unit_id"].isin(units)].drop_duplicates("unit_id")
        u_failed = reps[reps["status"] == "failed"]
        u_pending = len(units) - len(reps)
        print(
            f"representation tests: {len(units)} units: {len(reps) - len(u_failed)} done, {len(u_failed)}"
            f" failed, {u_pending} pending"
        )
        for _, r in u_failed.head(20).iterrows():
            print(f"  failed unit {r['unit_id']} ({r['test']}): {r['error']}")
        pending += u_pending
        failed = pd.concat([failed, u_failed]) if len(u_failed) else failed
    if pending or len(failed):
        print(f"finish with: stitchsweep resume {sweep_dir.uri}" + (" --failed" if len(failed) else ""))
    return not pending and not len(failed)


def cmd_status(args) -> int:
    sweep, sweep_dir = _open_results(args.results)
    _print_status(sweep, sweep_dir)
    return 0


def cmd_report(args) -> int:
    from analysis.report import write_report

    p = _storage("RESULTS", args.results)
    _check_results(p, args.results, "trials", "a results directory with a trials/ folder (made by `stitchsweep run`)")
    index = write_report(p, Path(args.out))
    print(f"report: {index}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stitchsweep", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("plan", help="validate a search space and list its trials")
    p.add_argument("space")
    p.set_defaults(fn=cmd_plan)

    def ray_options(p):
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

    p = sub.add_parser("run", help="run a sweep (trials already recorded are skipped)")
    p.add_argument("space")
    p.add_argument("--storage", default="results", help="results root (default: ./results)")
    ray_options(p)
    p.set_defaults(fn=cmd_run)

    p = sub.add_parser("resume", help="finish an interrupted sweep from its results directory")
    p.add_argument("results", help="RESULTS directory, e.g. results/quickstart")
    ray_options(p)
    p.set_defaults(fn=cmd_resume)

    p = sub.add_parser("status", help="count done / failed / pending trials")
    p.add_argument("results")
    p.set_defaults(fn=cmd_status)

    p = sub.add_parser("report", help="write the HTML report and PNG charts of a sweep")
    p.add_argument("results")
    p.add_argument("--out", default="report", help="output directory (default: ./report)")
    p.set_defaults(fn=cmd_report)
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
