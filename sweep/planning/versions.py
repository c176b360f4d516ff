"""What a change of a plugin's code reruns: the units whose id is new while the same unit under the plugin
versions a results folder recorded (its copies in `RESULTS/plugins/`) is done there."""

from __future__ import annotations

from contextlib import contextmanager

from sweep.config.plugins import recorded_versions
from sweep.registry import KINDS, PLUGIN_VERSIONS


@contextmanager
def _versions(versions: dict[str, str]):
    saved = dict(PLUGIN_VERSIONS)
    PLUGIN_VERSIONS.update(versions)
    try:
        yield
    finally:
        PLUGIN_VERSIONS.clear()
        PLUGIN_VERSIONS.update(saved)


def version_reruns(sweep, sweep_dir, todo: dict[str, list[str]]) -> dict[str, int]:
    """Kind -> how many of the units `todo` schedules rerun only because a plugin's version changed."""
    from sweep.config.space import parse_space
    from sweep.planning.planning import to_run

    before = {m: v for m, v in recorded_versions(sweep_dir).items() if PLUGIN_VERSIONS.get(m, v) != v}
    if not before:
        return {}
    with _versions(before):  # the same space, its ids under the recorded versions
        old = parse_space({k: v for k, v in sweep.raw.items() if k != "plugins"})  # imported already
        old_todo = {k: set(v) for k, v in to_run(old, sweep_dir, retry_failed=False, dry=True).items()}
    counts = {}
    for name, kind in KINDS.items():
        new_ids, old_ids = list(kind.units(sweep)), list(kind.units(old))
        pending = set(todo.get(name, ()))
        # done under the recorded versions, to run under the current ones (a donor's id is its name: its key moved)
        n = sum(a in pending and b not in old_todo.get(name, ()) for a, b in zip(new_ids, old_ids))
        if n:
            counts[name] = n
    return counts


def plan_lines(sweep, sweep_dir, todo: dict[str, list[str]]) -> list[str]:
    """`plan --storage`'s lines: how many units a changed plugin reruns, per kind."""
    return [
        f"{KINDS[k].noun} rerun because a plugin's code changed: {n}"
        for k, n in version_reruns(sweep, sweep_dir, todo).items()
    ]
