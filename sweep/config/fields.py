"""Reading typed, validated fields out of a parsed YAML mapping, and the stable hash behind every identity."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from sweep.config.errors import MISSING, SpecError
from sweep.registry import did_you_mean

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def stable_hash(obj: dict) -> str:
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=list)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class Section:
    """Reads typed fields out of one mapping, naming `path.key` in every error, and rejects unknown keys."""

    def __init__(self, raw: Any, path: str, allowed: set[str]) -> None:
        if not isinstance(raw, dict):
            raise SpecError(path, "a mapping", raw)
        self.raw, self.path = raw, path
        unknown = sorted(set(raw) - allowed, key=str)
        if unknown:
            raise SpecError(
                self.name(str(unknown[0])),
                f"one of the fields {sorted(allowed)}",
                unknown[0],
                "unknown field: misspelt?",
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
