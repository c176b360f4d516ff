"""Parts kept out of the tables: a unit's parts set aside for a rerun (`stitchsweep run --rerun`), moved to
`RESULTS/_set_aside/<UTC timestamp>/<table>/<part>.kept`, and the parts of units no longer in the sweep's space
(stale), moved to `RESULTS/_stale/<table>/<part>.kept` and back when the space names their units again. Moved,
not deleted, where no reader of the tables looks: readers read the table folders by name, pyarrow and pandas
skip folders whose name starts with '_', and the `.kept` suffix keeps them out of a `**/*.parquet` glob (they
are Parquet all the same). A part already gathered into a compacted file (`sweep.store.compact`) is taken out of
it: its rows are written aside as the part, then the compacted file is rewritten without them."""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.compute as pc

from sweep.store.compact import COMPACTED_PREFIX, PART_COLUMN, compacted_name, is_compacted
from sweep.store.layout import KEPT_SUFFIX, PART_SUFFIX, SET_ASIDE_DIR
from sweep.store.storage import TMP_PREFIX


def set_aside_units(sweep, sweep_dir, selected: dict[str, set[str]]) -> tuple[object, int]:
    """Move the existing parts of the `selected` units (kind name -> unit ids) aside; returns the folder they
    went to and how many parts moved."""
    from sweep.registry import KINDS

    folder = sweep_dir.path / SET_ASIDE_DIR / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    moved, held = 0, {}  # held: table folder -> names of parts that are not loose files
    for name, uids in selected.items():
        kind, units = KINDS[name], KINDS[name].units(sweep)
        for uid in uids:
            for part in kind.parts(sweep_dir, units[uid]):
                if part.exists():
                    target = folder / part.parent.name / (part.name + KEPT_SUFFIX)
                    target.parent.mkdir()
                    part.rename(target)
                    moved += 1
                else:
                    held.setdefault(part.parent.path, (part.parent, set()))[1].add(part.name)
    for table, names in held.values():
        moved += _take_out(table, names, folder / table.name)
    return folder, moved


def _take_out(table, names: set[str], aside) -> int:
    """Move the parts `names` out of the compacted files of one table folder into `aside`: each one's rows
    written there as its part first, then each compacted file that held some rewritten without them (whole,
    under a new name) and the old one removed. Returns how many parts were taken out."""
    taken: set[str] = set()
    for f in [f for f in table.files(PART_SUFFIX) if is_compacted(f)]:
        try:
            t = f.read_parquet()
        except Exception:  # unreadable (truncated, its checksum wrong): holds nothing, the planner sets it aside
            continue
        hit = pc.is_in(t[PART_COLUMN], value_set=pa.array(sorted(names), pa.string()))
        if not pc.any(hit).as_py():
            continue
        out = t.filter(hit)
        for part in set(out[PART_COLUMN].to_pylist()):
            aside.mkdir()
            rows = out.filter(pc.equal(out[PART_COLUMN], part)).drop_columns([PART_COLUMN])
            (aside / (part + KEPT_SUFFIX)).write_parquet(rows)
            taken.add(part)
        rest = t.filter(pc.invert(hit))
        if rest.num_rows:
            (table / compacted_name()).write_parquet(rest)
        f.unlink(missing_ok=True)
    return len(taken)


def retire(table, keep: set[str], aside) -> int:
    """Move every part of the table folder `table` whose name is not in `keep` (loose, or held by a compacted
    file) into `aside`, as `<part>.kept` (replacing an older copy there). Returns how many parts moved."""
    moved, held = 0, set()
    for f in table.files(PART_SUFFIX) if table.exists() else ():
        if f.name.startswith(TMP_PREFIX) or f.name in keep:
            continue
        if is_compacted(f):
            try:
                names = f.read_parquet(columns=[PART_COLUMN])[PART_COLUMN].to_pylist()
            except Exception:  # unreadable: the planner sets it aside (`planning.statuses`)
                continue
            held |= {p for p in names if p not in keep}
            continue
        aside.mkdir()
        f.rename(aside / (f.name + KEPT_SUFFIX))
        moved += 1
    return moved + (_take_out(table, held, aside) if held else 0)


def restore(table, wanted: set[str], aside) -> list[str]:
    """Move back into `table` the kept parts in `aside` whose names are in `wanted` and that the table does not
    hold (loose or compacted): units the space names again, recorded without being computed again. Returns the
    names moved back."""
    if not aside.exists():
        return []
    held = {f.name for f in table.files(PART_SUFFIX)} if table.exists() else set()
    for f in [table / n for n in held if n.startswith(COMPACTED_PREFIX)]:
        try:
            held |= set(f.read_parquet(columns=[PART_COLUMN])[PART_COLUMN].to_pylist())
        except Exception:  # unreadable: holds nothing (`planning.statuses`)
            continue
    back = []
    for f in aside.files(KEPT_SUFFIX):
        name = f.name[: -len(KEPT_SUFFIX)]
        if name in wanted and name not in held:
            table.mkdir()
            f.rename(table / name)
            back.append(name)
    return back
