"""Setting a unit's parts aside for a rerun (`stitchsweep run --rerun`): moved, not deleted, to
`RESULTS/_set_aside/<UTC timestamp>/<table>/<part>`, where no reader of the tables looks (they read the table
folders by name; pyarrow and pandas skip folders whose name starts with '_')."""

from __future__ import annotations

import time

from sweep.store.layout import SET_ASIDE_DIR


def set_aside_units(sweep, sweep_dir, selected: dict[str, set[str]]) -> tuple[object, int]:
    """Move the existing parts of the `selected` units (kind name -> unit ids) aside; returns the folder they
    went to and how many parts moved."""
    from sweep.registry import KINDS

    folder = sweep_dir.path / SET_ASIDE_DIR / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    moved = 0
    for name, uids in selected.items():
        kind, units = KINDS[name], KINDS[name].units(sweep)
        for uid in uids:
            for part in kind.parts(sweep_dir, units[uid]):
                if part.exists():
                    target = folder / part.parent.name / part.name
                    target.parent.mkdir()
                    part.rename(target)
                    moved += 1
    return folder, moved
