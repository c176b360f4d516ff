"""What `--only` and `--rerun` select on the command line (`sweep.plan.selection`), and setting `--rerun`'s
units aside before a run."""

from __future__ import annotations


def selected(sweep, texts: list[str] | None, flag: str = "--only") -> dict[str, set[str]] | None:
    """Kind name -> the unit ids the selections `texts` pick (`sweep.plan.selection`); None without any."""
    from sweep.plan.selection import select

    return select(sweep, texts, flag) if texts else None


def run_selection(sweep, sweep_dir, args) -> dict[str, set[str]] | None:
    """What `run --only` / `--rerun` restrict the run to (with the donors those units read), None for all;
    `--rerun`'s units have their parts set aside first (`sweep.store.aside`), so that they run again."""
    from sweep.plan.selection import with_donors
    from sweep.store.aside import set_aside_units

    only, rerun = getattr(args, "only", None), getattr(args, "rerun", None)
    if not only and not rerun:
        return None
    chosen = selected(sweep, only) or {}
    again = selected(sweep, rerun, "--rerun") or {}
    if rerun:
        folder, moved = set_aside_units(sweep, sweep_dir, again)
        print(f"--rerun: set aside {moved} part(s) of {sum(map(len, again.values()))} unit(s) in {folder}", flush=True)
    merged = {k: chosen.get(k, set()) | again.get(k, set()) for k in {*chosen, *again}}
    return with_donors(sweep, merged)
