"""Reading typed, validated fields out of a parsed YAML mapping, and the stable hash behind every identity."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sweep.config.errors import MISSING, SpecError
from sweep.registry import did_you_mean, versions_of

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def stable_hash(obj: dict) -> str:
    """The identity of `obj`, with the versions of the plugin registrations it names (none for shipped ones)."""
    if versions := versions_of(obj):
        obj = {**obj, "versions": versions}
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=list)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


# What an index computes, versioned: a fix that changes an index's numbers bumps it here, and the identity of
# every unit that requests the index includes it (`index_revisions`), so only those units rerun. 2 (pwcca):
# the rank tolerance no longer grows with the rows (numpy's max(n, p) x eps32 dropped real directions of
# per-position rows).
INDEX_REVISIONS = {"pwcca": 2}


def index_revisions(indices) -> dict:
    """The revisions above 1 of the requested `indices`, for a unit's hash (empty: the old ids hold)."""
    return {name: INDEX_REVISIONS[name] for name in sorted(indices) if name in INDEX_REVISIONS}


REQUIRED = ...  # the default of a field that has none


@dataclass(frozen=True)
class Option:
    """One field of a search-space section, declared once: its type, default and bounds. The parsers read
    fields through it (`Section.read`), docs/search-spaces.md states the same defaults (a test compares them).

    `choices`: a tuple, or a callable returning the names (a registry, read when the field is). `many`: a
    non-empty list of values. `cap`: the default is at most this many of the data's images ("train" or
    "test"), `capped(n)`. `derived`: the default is computed from other fields (the dataset's threat model,
    say), as `doc` says; `default` is then what the field holds when it is not written (None)."""

    key: str
    kind: str  # "integer" | "number" | "string" | "bool" | "mapping"
    default: Any = REQUIRED
    low: float | None = None
    high: float | None = None
    choices: tuple | Callable[[], Iterable[str]] | None = None
    nullable: bool = False
    many: bool = False
    cap: str | None = None
    derived: bool = False
    doc: str = ""
    # the space language (`sweep.config.generators`): a list of donor REFs that also takes selections, or a
    # list of pair entries (with these two role names) that also takes pair generators
    refs: bool = False
    pairs: tuple[str, str] | None = None
    fields: dict | None = None  # a mapping field's own declared fields (the schema reads them)
    or_list: bool = False  # a string, or a non-empty list of strings ("all" or [layer1.0, layer2.1])
    # (field, value) or (field, (values...)): the field applies (and, if required, is required) only then
    only: tuple[str, Any] | None = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def names(self):
        return sorted(self.choices()) if callable(self.choices) else self.choices

    def capped(self, n: int) -> int:
        """The default when the data has `n` images of the kind `cap` names."""
        return min(self.default, n)


def by_key(options: Iterable[Option]) -> dict[str, Option]:
    return {o.key: o for o in options}


class Section:
    """Reads typed fields out of one mapping, naming `path.key` in every error, and rejects unknown keys."""

    def __init__(self, raw: Any, path: str, allowed: set[str]) -> None:
        if not isinstance(raw, dict):
            raise SpecError(path, "a mapping", raw)
        self.raw, self.path = raw, path
        unknown = sorted(set(raw) - allowed, key=str)
        if unknown:
            hint = did_you_mean(unknown[0], allowed) or "misspelt?"
            raise SpecError(
                self.name(str(unknown[0])), f"one of the fields {sorted(allowed)}", unknown[0], f"unknown field: {hint}"
            )

    def name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def get(
        self, key: str, kind: str, default: Any = ..., *, low=None, high=None, choices=None, nullable: bool = False
    ) -> Any:
        if key not in self.raw:
            if default is ...:
                raise SpecError(self.name(key), _a(kind), MISSING, "the field is required")
            return default
        return check_value(self.raw[key], self.name(key), kind, low=low, high=high, choices=choices, nullable=nullable)

    def read(self, option: Option, *, default: Any = REQUIRED, high: float | None = None) -> Any:
        """The field `option` declares (a caller may pass a default computed from the data, and a tighter
        upper bound)."""
        value_default = option.default if default is REQUIRED else default
        bounds = dict(low=option.low, high=option.high if high is None else high, choices=option.names())
        if option.many:
            value_default = list(value_default) if isinstance(value_default, (list, tuple)) else value_default
            return self.get_list(option.key, option.kind, value_default, **bounds)
        return self.get(option.key, option.kind, value_default, nullable=option.nullable, **bounds)

    def get_list(self, key: str, kind: str, default: Any = ..., **kw) -> list:
        value = self.raw.get(key, default)
        if value is ...:
            raise SpecError(self.name(key), f"a list of {kind}s", MISSING, "the field is required")
        if not isinstance(value, list) or not value:
            raise SpecError(self.name(key), f"a non-empty list of {kind}s", value)
        return [check_value(v, f"{self.name(key)}[{i}]", kind, **kw) for i, v in enumerate(value)]


def _a(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def check_value(value: Any, path: str, kind: str, *, low=None, high=None, choices=None, nullable: bool = False) -> Any:
    if value is None and nullable:
        return None
    if kind == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "number":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif kind == "string":
        ok = isinstance(value, str) and value != ""
    elif kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "mapping":
        ok = isinstance(value, dict)
    else:  # pragma: no cover - programming error
        raise TypeError(kind)
    if not ok:
        raise SpecError(path, _a(kind) + (" or null" if nullable else ""), value)
    if choices is not None and value not in choices:
        raise SpecError(path, f"one of {list(choices)}", value, did_you_mean(value, choices))
    if low is not None and value < low or high is not None and value > high:
        if high is None:
            raise SpecError(path, f"{_a(kind)} >= {low}", value)
        if low is None:
            raise SpecError(path, f"{_a(kind)} <= {high}", value)
        raise SpecError(path, f"{_a(kind)} in [{low}, {high}]", value)
    return value
