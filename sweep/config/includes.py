"""`include:` in a search space: the included files' fields first (in the order listed, each with its own
includes), then the including file's own, which override them; mappings merge key by key, anything else
(lists, values) is replaced. Paths are relative to the including file."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from sweep.config.errors import SpecError


def read_yaml(path: Path, label: str | None = None) -> Any:
    """A YAML file's content, or a `SpecError` naming the file and the line of a syntax error."""
    label = label or str(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(label, "a readable search-space YAML file", str(path), exc.strerror or str(exc)) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(label, "valid YAML", _yaml_problem(exc)) from None


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """What is wrong, and where: an unclosed bracket or brace is reported by YAML where the file ends or the
    next key starts, so the line where the flow collection opened comes first."""
    mark, opened = getattr(exc, "problem_mark", None), getattr(exc, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = (getattr(exc, "problem", None) or str(exc).splitlines()[0]) + where
    context = getattr(exc, "context", None) or ""
    if opened is not None and "flow" in context:
        what = context.removeprefix("while parsing a ")
        return f"a {what} opened at line {opened.line + 1}, column {opened.column + 1} is not closed: {problem}"
    return problem


def merge(base: Any, over: Any) -> Any:
    """`over` on top of `base`: mappings key by key, anything else replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = merge(base[k], v) if k in base else v
        return out
    return over


def resolve_includes(raw: Any, base: Path, label: str, chain: tuple[Path, ...] = (), read: list | None = None) -> Any:
    """`raw` (read from `label`, whose includes are relative to `base`) with its includes merged under it.
    `read` gets (name, path) of every included file, those whose fields the others override first."""
    if not isinstance(raw, dict) or "include" not in raw:
        return raw
    files = raw["include"]
    files = [files] if isinstance(files, str) else files
    if not isinstance(files, list) or not files or not all(isinstance(f, str) and f for f in files):
        raise SpecError(f"{label}: include", "a file name or a list of file names", raw["include"])
    merged: dict = {}
    for f in files:
        path = (base / f).expanduser().resolve()
        if path in chain:
            cycle = " -> ".join(p.name for p in (*chain, path))
            raise SpecError(f"{label}: include", "includes without a cycle", f, f"cycle: {cycle}")
        if not path.is_file():
            raise SpecError(f"{label}: include", "a search-space YAML file", f, f"no such file: {path}")
        inner = read_yaml(path, f"{label}: include {f}")
        if not isinstance(inner, dict):
            raise SpecError(f"{label}: include {f}", "a mapping of search-space fields", inner)
        merged = merge(merged, resolve_includes(inner, path.parent, str(path), (*chain, path), read))
        if read is not None:
            read.append((os.path.relpath(path, chain[0].parent if chain else base), path))
    return merge(merged, {k: v for k, v in raw.items() if k != "include"})


def in_file(err: SpecError, files: list[tuple[str, Path]]) -> SpecError:
    """`err` with the included file (and line) its field comes from: `files` are (name, path) of the space's
    file and what it includes, the file whose fields win first. An error of the space's own file is kept."""
    path = tuple(int(t[1:-1]) if t[0] == "[" else t for t in re.findall(r"\[\d+\]|[^.\[\]]+", err.field.split(" ")[0]))
    best = None  # (length of the prefix found, name, line)
    for name, file in files:
        lines = _lines(file)
        found = max((k for k in range(1, len(path) + 1) if path[:k] in lines), default=0)
        if found and (best is None or found > best[0]):
            best = (found, name, lines[path[:found]][0])
        if found == len(path) or found and not lines[path[:found]][1]:
            break  # this file sets the field, or replaces the whole list or value the field is in
    if best is None or best[1] == files[0][0] or ": " in err.field:
        return err
    return SpecError(f"{best[1]}, line {best[2]}: {err.field}", err.expected, err.found, err.hint)


def _lines(file: Path) -> dict[tuple, tuple[int, bool]]:
    """Each key path of a YAML file -> (its line, whether its value is a mapping)."""
    out: dict[tuple, tuple[int, bool]] = {}

    def walk(node, at: tuple) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                out[(*at, key.value)] = (key.start_mark.line + 1, isinstance(value, yaml.MappingNode))
                walk(value, (*at, key.value))
        elif isinstance(node, yaml.SequenceNode):
            for i, value in enumerate(node.value):
                out[(*at, i)] = (value.start_mark.line + 1, isinstance(value, yaml.MappingNode))
                walk(value, (*at, i))

    try:
        walk(yaml.compose(file.read_text()), ())
    except (OSError, yaml.YAMLError):
        pass
    return out
