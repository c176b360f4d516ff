"""`stitchsweep` command line: plan, run, resume, status, compact, report, figures, du, prune, schema, init.

Bad input (a wrong search space, a path that is not a results directory) exits with code 2 and one line
that names the field, what was expected and what was found, before anything runs or is written.
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
import threading
from pathlib import Path

from sweep.backends.kills import EXIT_TERMINATED, said, stop_on_sigterm, terminated, unhook
from sweep.cli.commands import (  # noqa: F401  (re-exported: the exit codes are used by tests)
    EXIT_BAD_INPUT,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    cmd_compact,
    cmd_plan,
    cmd_report,
    cmd_resume,
    cmd_run,
    cmd_schema,
    cmd_status,
)
from sweep.config.errors import SpecError
from sweep.config.plugins import absolute, load_plugins


def _command(sub, name: str, fn, help: str, example: str, first: tuple[str, str]) -> argparse.ArgumentParser:
    """A subcommand with its help, an example and its positional argument."""
    p = sub.add_parser(name, help=help, epilog=f"example: stitchsweep {name} {example}")
    p.add_argument(first[0], help=first[1])
    p.set_defaults(fn=fn)
    _plugin_option(p)
    return p


def _plugin_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        help="a module of your own to import first (a .py file, a package folder or a module name; repeatable):"
        " its architectures, indices, objectives and kinds then validate, run and report like shipped ones",
    )


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
    p.add_argument(
        "--tracker",
        action="append",
        default=None,
        help="also log each unit's row and curves to mlflow:TRACKING_URI or wandb:PROJECT (repeatable; the Parquet"
        " parts stay the record)",
    )


SPACE = ("space", "a search-space YAML file, or a shipped space's name (stitchsweep init --list)")
OVERRIDES = "overrides as in Hydra: key.path=value (replace), +key.path=value (add), ~key.path (delete)"
ONLY = "only the units this selection picks: field=glob pairs, ',' = and (e.g. objective=dm,stitch_point=layer2.*);"
ONLY += " repeat it for or"
RESULTS = ("results", "RESULTS directory, e.g. results/quickstart")


class _Version(argparse._VersionAction):
    """argparse's `version` action, which looks the version up only when asked: `sweep.__version__` reads the
    installed package's metadata (importlib.metadata), tens of milliseconds that no other command needs."""

    def __call__(self, parser, namespace, values, option_string=None):
        from sweep import __version__

        self.version = f"stitchsweep {__version__}"
        super().__call__(parser, namespace, values, option_string)


def build_parser() -> argparse.ArgumentParser:
    from sweep.cli.disk import add_disk
    from sweep.cli.papers import add_figures
    from sweep.cli.shipped import add_init

    parser = argparse.ArgumentParser(prog="stitchsweep", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action=_Version, help="print stitchsweep's version (the installed package's)")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_space_commands(sub)
    _add_results_commands(sub)
    add_figures(sub)
    add_disk(sub)
    p = sub.add_parser(
        "schema",
        help="print the JSON Schema of search spaces (for editors)",
        epilog="example: stitchsweep schema > stitchsweep-space.schema.json",
    )
    p.set_defaults(fn=cmd_schema)
    _plugin_option(p)
    add_init(sub)
    return parser


def _add_space_commands(sub) -> None:
    """`plan` and `run`: the commands that read a search space."""
    p = _command(sub, "plan", cmd_plan, "validate a search space and summarise its work",
                 "search_spaces/quickstart.yaml --trials", SPACE)  # fmt: skip
    p.add_argument("overrides", nargs="*", help=OVERRIDES)
    p.add_argument("--only", action="append", default=None, metavar="SELECTION", help=ONLY)
    p.add_argument("--trials", action="store_true", help="list every unit of work (default: a summary)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON (summary and every unit)")
    p.add_argument("--expand", action="store_true", help="print the expanded space (plain YAML, runnable as is)")
    p.add_argument("--storage", default=None, help="also say what this results root has recorded and would run")
    p.add_argument("--estimate", action="store_true", help="predict the device time of what would run (cost model)")
    p.add_argument("--costs", default=None, help="--estimate: a profile file, or cpu-2core (default), nvidia-h200")
    p.add_argument("--workers", type=int, default=None, help="--estimate: units at once (default: as run here)")
    p.add_argument(
        "--address", default=None, help="count the memory lines on this running Ray cluster's nodes (host:port)"
    )

    p = _command(sub, "run", cmd_run, "run a sweep (trials already recorded are skipped)",
                 "search_spaces/quickstart.yaml --storage results --num-cpus 2", SPACE)  # fmt: skip
    p.add_argument("overrides", nargs="*", help=OVERRIDES)
    p.add_argument(
        "--storage", default="results", help="results root: a folder or a pyarrow.fs URI (default: ./results)"
    )
    p.add_argument("--only", action="append", default=None, metavar="SELECTION", help=ONLY + "; the rest stays pending")
    p.add_argument(
        "--rerun",
        action="append",
        default=None,
        metavar="SELECTION",
        help="run these units again: their parts are first moved to RESULTS/_set_aside/<time>/ (kept)",
    )
    _ray_options(p)


def _add_results_commands(sub) -> None:
    """`resume`, `status`, `compact` and `report`: the commands that read a results directory."""
    p = _command(sub, "resume", cmd_resume, "finish an interrupted sweep from its results directory",
                 "results/quickstart --failed", RESULTS)  # fmt: skip
    _ray_options(p)

    p = _command(sub, "status", cmd_status,
                 "count done / failed / pending units; exit code 0 when the sweep is complete, 1 otherwise",
                 "results/quickstart --json", RESULTS)  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the counts and first failures as JSON")
    p.add_argument("--only", action="append", default=None, metavar="SELECTION", help="count only " + ONLY[5:])
    _command(sub, "compact", cmd_compact,
             "gather a sweep's done parts into at most 100 files per table (runs also do it after each stage)",
             "results/quickstart", RESULTS)  # fmt: skip

    p = sub.add_parser("report", help="write the HTML report and PNG charts of a sweep (or of a paper's items)",
                       epilog="example: stitchsweep report results/quickstart --out report/quickstart (a paper's page:"
                       " stitchsweep report results/jones_fmnist --paper jones-2022)")  # fmt: skip
    p.add_argument("results", nargs="+", help="RESULTS directory, e.g. results/quickstart (several with --paper)")
    p.set_defaults(fn=cmd_report)
    _plugin_option(p)
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and hasattr(args, "overrides") and not any(e.startswith("-") for e in extra):
        args.overrides = [*args.overrides, *extra]  # overrides after options: `plan SPACE --trials a.b=1`
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command in ("run", "resume"):  # SIGTERM (SLURM, Kubernetes) stops them as Ctrl+C does
        stop_on_sigterm(lambda: _resume_line(args))
    try:
        if getattr(args, "plugin", None):  # before anything reads a space or results: one line if one fails
            load_plugins(args.plugin, Path.cwd(), "--plugin")
            args.plugin = [absolute(p, Path.cwd()) for p in args.plugin]  # files, folders: of the working directory
        return args.fn(args)
    except SpecError as exc:
        print(f"stitchsweep: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # e.g. `stitchsweep plan SPACE | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt as exc:
        what = "stopped by SIGTERM" if terminated() else "interrupted"
        print(f"stitchsweep: {what}{f' ({exc})' if str(exc) else ''}; {_resume_line(args)}", file=sys.stderr)
        said()
        return EXIT_TERMINATED if terminated() else EXIT_INTERRUPTED
    finally:
        unhook()


def _resume_line(args) -> str:
    where = getattr(args, "sweep_uri", None) or getattr(args, "results", None) or "RESULTS"
    return f"every finished trial is recorded. Finish with: stitchsweep resume {where}"


def entry() -> None:
    """The `stitchsweep` command (and `python -m sweep`): `main`, then the interpreter's exit without its teardown
    of every module the command imported. By then each file is written and closed, Ray stopped and the lease
    released; freeing Ray's, Arrow's and pandas' modules one by one takes 0.3-0.4 s on the 2-core machine,
    which is part of every command's wall time and nothing needs. What the exit does run: it waits for the
    threads that are not daemons (and thread pools' workers), then the exit handlers, then flushes the output."""
    code = main()
    threading._shutdown()  # as the interpreter's exit would: non-daemon threads, thread pools
    atexit._run_exitfuncs()  # Ray's, the embedded node's, logging's
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`stitchsweep plan SPACE | head`)
            pass
    os._exit(0 if code is None else int(code))


if __name__ == "__main__":
    entry()
