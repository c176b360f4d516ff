"""`stitchsweep init`: a shipped search space (and the files it includes) copied into a folder of one's own, as a
starting point to change; `--list` names the shipped spaces (`sweep.config.shipped`)."""

from __future__ import annotations

from pathlib import Path

from sweep.config import shipped


def cmd_init(args) -> int:
    if args.list or args.name is None:
        known = shipped.names()
        root = shipped.folder()
        width = max((len(n) for n in known), default=0)
        for name in known:
            print(f"{name:<{width}}  {shipped.description(root / f'{name}.yaml')}".rstrip())
        if args.name is None and not args.list:
            print("copy one: stitchsweep init NAME [DEST]")
        return 0
    dest = Path(args.dest)
    done = shipped.copy_space(args.name, dest)
    for path, written in done:
        print(f"{'wrote' if written else 'kept (the same text)'} {path}")
    space = done[0][0]
    shown = space if dest != Path(".") else Path(space.name)
    print(f"next: stitchsweep plan {shown}   (then: stitchsweep run {shown})")
    return 0


def add_init(sub) -> None:
    """The `init` subcommand."""
    p = sub.add_parser(
        "init",
        help="copy a shipped search space (and the files it includes) into a folder, as a starting point",
        epilog="example: stitchsweep init a_first_study   (then: stitchsweep plan a_first_study.yaml)",
    )
    p.add_argument(
        "name", nargs="?", default=None, help="a shipped space's name, e.g. a_first_study (--list names them all)"
    )
    p.add_argument("dest", nargs="?", default=".", help="the folder to copy into (default: here; made if missing)")
    p.add_argument("--list", action="store_true", help="list the shipped spaces: their names and first lines")
    p.set_defaults(fn=cmd_init)
