"""`include:` in a search space: the included files' fields first (in the order listed, each with its own
includes), then the including file's own, which override them; mappings merge key by key, anything else
(lists, values) is replaced. Paths are relative to the including file."""

from __future__ import annotations

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
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(label, "valid YAML", f"{problem}{where}") from None


def merge(base: Any, over: Any) -> Any:
    """`over` on top of `base`: mappings key by key, anything else replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = merge(base[k], v) if k in base else v
        return out
    return over


def resolve_includes(raw: Any, base: Path, label: str, chain: tuple[Path, ...] = ()) -> Any:
    """`raw` (read from `label`, whose includes are relative to `base`) with its includes merged under it."""
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
        merged = merge(merged, resolve_includes(inner, path.parent, str(path), (*chain, path)))
    return merge(merged, {k: v for k, v in raw.items() if k != "include"})
