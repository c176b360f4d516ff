"""Command-line overrides of a search space, in Hydra's grammar: `key.path=value` replaces a key that exists,
`+key.path=value` adds one that is absent (refused when present), `++key.path=value` sets it either way and
`~key.path` deletes it. A number picks an item of a list; `*` stands for every item of a list (every value of a
mapping), and the override applies to each (`stitching.*.epochs=2`). Values are YAML flow scalars or collections
(`3`, `[0,1,2]`, `{a: 1}`, `null`).

They apply to the space's raw mapping after its includes and before validation; an error a value causes
names the override it comes from (`overrides_named`)."""

from __future__ import annotations

import copy
import difflib
import re
from dataclasses import dataclass, replace
from typing import Any

import yaml

from sweep.config.errors import SpecError

_KEY = re.compile(r"^[A-Za-z_][\w\-]*(\.([\w\-]+|\*))*(?<!\*)$")  # names, `*` anywhere but first and last


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
        expected = "a key path of names separated by '.' (stitching.epochs; '*' for every item: stitching.*.epochs)"
        raise SpecError(where, expected, key)
    return Override(text, op, tuple(key.split(".")), value)


def _child(node: Any, name: str, ov: Override, at: int) -> tuple[bool, Any]:
    """(whether `node` has `name`, its value): a mapping's key, or a list's index."""
    if isinstance(node, dict):
        return name in node, node.get(name)
    if isinstance(node, list) and name.isdigit():
        return int(name) < len(node), node[int(name)] if int(name) < len(node) else None
    where = ".".join(ov.path[:at]) or "the space"
    if isinstance(node, list):  # its length, not the whole list, and the paths into it
        raise SpecError(
            f"override {ov.text!r}", f"{where} to be a mapping", _Items(len(node)), _list_hint(node, ov, at)
        )
    raise SpecError(f"override {ov.text!r}", f"{where} to be a mapping", node)


class _Items:
    """What an error says it found instead of a mapping: a list's length, not the whole list."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"a list of {self.n} item{'s' * (self.n != 1)}"


def _list_hint(items: list, ov: Override, at: int) -> str:
    """The index paths that reach into a list: the first item that has the key (any mapping for `+`/`++`),
    and `*` for every item."""
    name = ov.path[at]
    fits = [i for i, x in enumerate(items) if isinstance(x, dict) and (name in x or ov.op in ("add", "force"))]
    head, key, tail = re.match(r"([+~]*)([^=]*)(.*)", ov.text).groups()
    path = key.split(".")  # as typed: with its `*`s

    def typed(index: str) -> str:  # the override as typed, with `index` inserted before the key
        return head + ".".join((*path[:at], index, *path[at:])) + tail

    every = f"{typed('*')} for every item"
    return f"{typed(str(fits[0]))} for item {fits[0]}, {every}" if fits else every


def _missing(node: Any, name: str, ov: Override, at: int) -> SpecError:
    """The error of a key that is absent: did-you-mean among its siblings, or how to add it."""
    keys = [str(k) for k in node] if isinstance(node, dict) else []
    close = difflib.get_close_matches(name, keys, n=1)
    typed = ov.text.lstrip("+~").split("=")[0].split(".")  # its key path with its `*`s
    hint = f"did you mean {'.'.join((*typed[:at], close[0]))}?" if close else ""
    if at == len(ov.path) - 1 and ov.op == "set":
        hint = hint or f"to add it: +{ov.text}"
    where = ".".join(ov.path[:at]) or "the space"
    return SpecError(f"override {ov.text!r}", f"a key of {where} ({', '.join(keys) or 'none'})", name, hint)


def _each(raw: dict, ov: Override) -> list[Override]:
    """The override once per item its first `*` stands for: each index of a list, each key of a mapping."""
    at = ov.path.index("*")
    node = raw
    for i, name in enumerate(ov.path[:at]):
        present, child = _child(node, name, ov, i)
        if not present:
            raise _missing(node, name, ov, i)
        node = child
    if not isinstance(node, (list, dict)):
        where = ".".join(ov.path[:at])
        raise SpecError(f"override {ov.text!r}", f"{where} to be a list or a mapping (for '*')", node)
    names = [str(i) for i in range(len(node))] if isinstance(node, list) else [str(k) for k in node]
    return [replace(ov, path=(*ov.path[:at], name, *ov.path[at + 1 :])) for name in names]


def apply_override(raw: dict, ov: Override) -> None:
    """Apply one override to `raw` in place (once per item of each `*`)."""
    if "*" in ov.path:
        for one in _each(raw, ov):
            apply_override(raw, one)
        return
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
    the field contains; `stitching[1]` is `stitching.1`, which `*` matches), else `err` itself."""
    field = re.sub(r"\[(\d+)\]", r".\1", err.field.split(" ")[0]).split(".")
    for ov in reversed(overrides):
        if all(k in ("*", f) for k, f in zip(ov.path, field)):  # one contains the other; `*`: any item
            return SpecError(f"override {ov.text!r}: {err.field}", err.expected, err.found, err.hint)
    return err
