"""`stitchsweep du` (what a sweep holds on disk, by kind) and `stitchsweep prune` (remove what no unit needs)."""

from __future__ import annotations

import argparse
import json

from sweep.planning import usage


def _cache_folder():
    """The node cache's folder of this user's settings; one another user owns or others can write is refused
    (a SpecError naming it and STITCHSWEEP_CACHE_DIR: `sweep.worker.cache.check_folder`)."""
    from sweep.worker.cache import Settings

    return Settings.from_env().disk_dir


def cmd_du(args) -> int:
    """Counts and sizes of a sweep's files by category, its node-cache entries included, then the cache folder's
    other entries apart (`--json`: machine-readable, the folder's entries by category under "cache")."""
    from sweep.cli.inputs import open_results

    _, sweep_dir = open_results(args.results)
    folder = _cache_folder()
    cache = usage.cache_files(folder, usage.records(sweep_dir))
    table = usage.summary(usage.files(sweep_dir) + [e for e in cache if e.category == usage.CACHE_MINE])
    if args.json:
        total = {"files": sum(v["files"] for v in table.values()), "bytes": sum(v["bytes"] for v in table.values())}
        folder_doc = {"folder": folder and str(folder), **usage.summary(cache)}  # every file there, by category
        print(json.dumps({"sweep": sweep_dir.uri, "categories": table, "total": total, "cache": folder_doc}, indent=1))
    else:
        print(f"{sweep_dir.uri} (the zoo is shared by the sweeps under {sweep_dir.root})")
        print("\n".join(usage.lines(table) + (usage.cache_lines(cache, folder) if folder else [])))
    return 0


def cmd_prune(args) -> int:
    """Remove the files no unit of any sweep under the root needs; the summary first, nothing with --dry-run."""
    from sweep.backends.lease import Lease
    from sweep.cli.inputs import open_results

    _, sweep_dir = open_results(args.results)
    need = usage.needs(sweep_dir.root)
    for line in need.unreadable:
        print(f"note: zoo kept whole: a space under the root could not be read ({line})")
    folder, recorded = (_cache_folder(), usage.records(sweep_dir)) if args.cache else (None, None)
    cache = usage.cache_files(folder, recorded)
    for line in recorded.unreadable if recorded else ():
        print(f"note: node cache kept whole: a sweep's record of its cache files could not be read ({line})")
    by_records = args.cache and not recorded.unreadable  # this sweep's files that no other sweep's record lists
    gone = usage.removable(usage.files(sweep_dir) + cache, need, args.zoo_unused, by_records, args.stale)
    print(("would remove" if args.dry_run else "removing") + f" ({len(gone)} files):")
    print("\n".join(usage.lines(usage.summary(gone)) + (usage.cache_lines(cache, folder, gone) if folder else [])))
    if args.dry_run:
        for e in sorted(gone, key=lambda e: e.loc.path):
            print(f"  {e.loc}")
        return 0
    with Lease(sweep_dir):  # refused while a driver runs this sweep: its writers' temporary files are live
        for e in gone:
            e.loc.unlink(missing_ok=True)
    return 0


def add_disk(sub) -> None:
    """The `du` and `prune` subcommands."""
    p = sub.add_parser("du", help="what a sweep holds on disk, by kind (parts, zoo, kept epochs, shards, cache)",
                       epilog="example: stitchsweep du results/quickstart --json")  # fmt: skip
    p.add_argument("results", help="RESULTS directory, e.g. results/quickstart (a folder or a pyarrow.fs URI)")
    p.add_argument("--json", action="store_true", help="print the categories' counts and bytes as JSON")
    p.set_defaults(fn=cmd_du)
    p = sub.add_parser(
        "prune",
        help="remove what no unit needs: temporary files, set-aside parts, unread kept epochs (never a part)",
        epilog="example: stitchsweep prune results/quickstart --zoo-unused --dry-run",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("results", help="RESULTS directory, e.g. results/quickstart (a folder or a pyarrow.fs URI)")
    cache_help = "also this sweep's node-cache files (STITCHSWEEP_CACHE_DIR) that no other sweep's record lists"
    p.add_argument("--cache", action="store_true", help=cache_help)
    p.add_argument("--zoo-unused", action="store_true", help="also the zoo folders of donors no sweep's space reads")
    p.add_argument("--stale", action="store_true", help="also the parts of units the sweep's space no longer names")
    p.add_argument("--dry-run", action="store_true", help="list what would go, remove nothing")
    p.set_defaults(fn=cmd_prune)
