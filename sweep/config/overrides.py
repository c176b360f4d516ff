"""Command-line overrides of a search space, in Hydra's grammar: `key.path=value` replaces a key that exists,
`+key.path=value` adds one that is absent (refused when present), `++key.path=value` sets it either way and
`~key.path` deletes it. Values are YAML flow scalars or collections (`3`, `[0,1,2]`, `{a: 1}`, `null`).

They apply to the space's raw mapping after its includes and before validation; an error a value causes
names the override it comes from (`overrides_named`)."""

from __future__ import annotations

import copy
import difflib
import re
from dataclasses import dataclass
from typing import Any

import yaml

from sweep.config.errors import SpecError

_KEY = re.compile(r"^[A-Za-z_][\w\-]*(\.[\w\-]+)*$")


@dataclass(frozen=True)
class Override:
    """One override as typed: its text, what it does ("set", "add", "force", "delete"), its key path and value."""

    text: str
    op: str
    path: tuple[str, ...]
    value: Any = None

    @property
    def key(self) -> str:
        return ".".join(self.path)


def parse_override(text: str) -> Override:
    """`key.path=value`, `+key.path=value`, `++key.path=value` or `~key.path` -> an `Override`."""
    where = f"override {text!r}"
    if text.startswith("~"):
        op, key, value = "delete", text[1:].partition("=")[0], None
    else:
        op = "force" if text.startswith("++") else "add" if text.startswith("+") else "set"
        key, eq, raw = text.lstrip("+").partition("=")
        if not eq:
            raise SpecError(where, "key.path=value, +key.path=value or ~key.path", text)
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as exc:
            raise SpecError(where, "a YAML value (e.g. 3, [0,1,2], {a: 1})", raw, str(exc).splitlines()[0]) from None
    if not _KEY.match(key):
        raise SpecError(where, "a key path of names separated by '.' (e.g. stitching.epochs)", key)
    return Override(text, op, tuple(key.split(".")), value)


def _child(node: Any, name: str, ov: Override, at: int) -> tuple[bool, Any]:
    """(whether `node` has `name`, its value): a mapping's key, or a list's index."""
    if isinstance(node, dict):
        return name in node, node.get(name)
    if isinstance(node, list) and name.isdigit():
        return int(name) < len(node), node[int(name)] if int(name) < len(node) else None
    where = ".".join(ov.path[:at]) or "the space"
    raise SpecError(f"override {ov.text!r}", f"{where} to be a mapping", node)


def _missing(node: Any, name: str, ov: Override, at: int) -> SpecError:
    """The error of a key that is absent: did-you-mean among its siblings, or how to add it."""
    keys = [str(k) for k in node] if isinstance(node, dict) else []
    close = difflib.get_close_matches(name, keys, n=1)
    hint = f"did you mean {'.'.join((*ov.path[:at], close[0]))}?" if close else ""
    if at == len(ov.path) - 1 and ov.op == "set":
        hint = hint or f"to add it: +{ov.text}"
    where = ".".join(ov.path[:at]) or "the space"
    return SpecError(f"override {ov.text!r}", f"a key of {where} ({', '.join(keys) or 'none'})", name, hint)


def apply_override(raw: dict, ov: Override) -> None:
    """Apply one override to `raw` in place."""
    node = raw
    for at, name in enumerate(ov.path[:-1]):
        present, child = _child(node, name, ov, at)
        if not present:
            if ov.op not in ("add", "force"):
                raise _missing(node, name, ov, at)
            child = node[name] = {}  # Hydra's + creates the mappings on the way
        node = child
    last = ov.path[-1]
    present, _ = _child(node, last, ov, len(ov.path) - 1)
    if ov.op == "add" and present:
        hint = f"it is present; to replace it: {ov.text[1:]}"
        raise SpecError(f"override {ov.text!r}", "a key the space does not have yet ('+' adds one)", ov.key, hint)
    if ov.op in ("set", "delete") and not present:
        raise _missing(node, last, ov, len(ov.path) - 1)
    index = int(last) if isinstance(node, list) else last
    if ov.op == "delete":
        del node[index]
    else:
        node[index] = ov.value


def apply_overrides(raw: dict, texts: list[str] | tuple[str, ...]) -> tuple[dict, list[Override]]:
    """A copy of `raw` with the overrides applied in order, and the parsed overrides."""
    overrides = [parse_override(t) for t in texts]
    out = copy.deepcopy(raw)
    for ov in overrides:
        apply_override(out, ov)
    return out, overrides


def overrides_named(err: SpecError, overrides: list[Override]) -> SpecError:
    """`err` named by the override its field comes from (the last one whose key contains the field, or that
    the field contains), else `err` itself."""
    field = err.field.split(" ")[0]
    for ov in reversed(overrides):
        k = ov.key
        if field == k or field.startswith((k + ".", k + "[")) or k.startswith(field + "."):
            return SpecError(f"override {ov.text!r}: {err.field}", err.expected, err.found, err.hint)
    return err
