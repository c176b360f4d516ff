"""Selections of a sweep's units in the space language's own terms: `objective=dm,stitch_point=layer2.*`.

A selection is field=pattern pairs joined by ',' (and), each pattern a glob (`fnmatch`) on the field's value;
several selections are alternatives (or). Fields are those of the units' specs as the space names them
(`objective`, `seed`, `front`, `stitch_point`, a donor's `arch` ...) and `kind` (trial, donor, ...). What
`run --only`, `run --rerun`, `status --only` and `plan --only` select.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
from typing import Any

from sweep.config.errors import SpecError

# a unit's field as the space names it -> the spec's field (a stitching entry's `stitch_points` are the
# trials' front points; its other keys are named as in the spec)
ALIASES = {"stitch_point": "front_point", "point": "front_point", "donor": "name"}


def fields_of(unit: Any) -> dict[str, Any]:
    """A unit's fields: its spec's, with those of a spec it wraps (a donor unit's donor) flattened in."""
    if not dataclasses.is_dataclass(unit):
        return {}
    out: dict[str, Any] = {}
    for f in dataclasses.fields(unit):
        value = getattr(unit, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            for k, v in fields_of(value).items():
                out.setdefault(k, v)
        else:
            out.setdefault(f.name, value)
    for alias, name in ALIASES.items():
        if name in out:
            out.setdefault(alias, out[name])
    return out


def parse_selection(text: str, flag: str = "--only") -> list[tuple[str, str]]:
    """'field=pattern,field=pattern' -> [(field, pattern), ...]."""
    pairs = []
    for word in text.split(","):
        name, eq, pattern = word.partition("=")
        if not eq or not name.strip():
            expected = "field=pattern pairs separated by ',' (e.g. objective=dm,stitch_point=layer2.*)"
            raise SpecError(flag, expected, text)
        pairs.append((name.strip(), pattern.strip()))
    return pairs


def _matches(value: Any, pattern: str) -> bool:
    """A glob on a value's text; a tuple (indices, attacks) matches when one of its items does."""
    if isinstance(value, (tuple, list)):
        return any(_matches(v, pattern) for v in value) or fnmatch.fnmatchcase(",".join(map(str, value)), pattern)
    text = "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    return fnmatch.fnmatchcase(text, pattern)


def select(sweep, texts: list[str], flag: str = "--only") -> dict[str, set[str]]:
    """Kind name -> the ids of its units that one of the selections `texts` selects (every unit when none).
    A field that no unit of the sweep has is refused, naming those that exist."""
    from sweep.registry import KINDS

    units = {name: kind.units(sweep) for name, kind in KINDS.items()}
    if not texts:
        return {name: set(u) for name, u in units.items()}
    fields = {name: {uid: fields_of(u) for uid, u in us.items()} for name, us in units.items()}
    known = {"kind"} | {k for us in fields.values() for f in us.values() for k in f}
    selections = [parse_selection(t, flag) for t in texts]
    for field, _ in (pair for sel in selections for pair in sel):
        if field not in known:
            close = difflib.get_close_matches(field, sorted(known), n=1)
            hint = f"did you mean {close[0]}?" if close else ""
            raise SpecError(flag, f"a field of this sweep's units ({', '.join(sorted(known))})", field, hint)
    out: dict[str, set[str]] = {name: set() for name in units}
    for name, us in fields.items():
        for uid, f in us.items():
            f = {**f, "kind": name}
            if any(all(k in f and _matches(f[k], p) for k, p in sel) for sel in selections):
                out[name].add(uid)
    return out


def with_donors(sweep, selected: dict[str, set[str]]) -> dict[str, set[str]]:
    """`selected` and the donor units its units read: a selected trial needs its donors trained first."""
    from sweep.registry import KINDS

    refs = set()
    for name, uids in selected.items():
        kind, units = KINDS[name], KINDS[name].units(sweep)
        if kind.donors is not None:
            refs.update(ref for uid in uids for ref in kind.donors(units[uid]))
    donors = KINDS["donor"].units(sweep) if "donor" in KINDS else {}
    needed = {uid for uid, work in donors.items() if work.donor.ref in refs}
    return {**selected, "donor": selected.get("donor", set()) | needed} if donors else selected


def only(plan: dict[str, list[str]], selected: dict[str, set[str]] | None) -> dict[str, list[str]]:
    """`plan` (kind -> unit ids) restricted to `selected` (None: all of it)."""
    if selected is None:
        return plan
    return {name: [u for u in uids if u in selected.get(name, ())] for name, uids in plan.items()}
