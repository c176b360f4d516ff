"""The search spaces that ship with stitchsweep, by name: `stitchsweep plan quickstart` reads the shipped
`quickstart.yaml` wherever the command runs, and `stitchsweep init a_first_study` copies a space (with the files
it includes) into a folder of one's own as a starting point.

An installed stitchsweep holds them as the package data `sweep/spaces/` (setup.py's build step copies the
checkout's `search_spaces/` there); a checkout, or an editable install, reads `search_spaces/` beside `sweep/`.
A space's name is its path under that folder without `.yaml` (`quickstart`, `own_checkpoints/ding_tests_imagenet`,
which its file's name alone also names); `shared/` holds the files spaces include, which are no spaces.
Imports no torch.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from sweep.config.errors import SpecError

SWEEP = Path(__file__).resolve().parents[1]
INCLUDED = "shared"  # the folder of the blocks spaces include
FIRST = ("quickstart", "a_first_study")  # the starting points, named first where names are listed
SUFFIXES = (".yaml", ".yml")


def folder() -> Path | None:
    """The folder of the shipped spaces: the installed package's, else the checkout's; None without either."""
    for where in (SWEEP / "spaces", SWEEP.parent / "search_spaces"):
        if where.is_dir():
            return where
    return None


def names() -> list[str]:
    """Every shipped space's name, the starting points first."""
    root = folder()
    if root is None:
        return []
    found = {
        p.relative_to(root).with_suffix("").as_posix()
        for p in root.rglob("*.yaml")
        if p.relative_to(root).parts[0] != INCLUDED
    }
    return [n for n in FIRST if n in found] + sorted(found - set(FIRST))


def _stem(name: str) -> str:
    """`name` without a `.yaml` suffix or a leading `search_spaces/` (the checkout's paths name shipped spaces too)."""
    stem = name.replace(os.sep, "/").removeprefix("./").removeprefix("search_spaces/")
    for suffix in SUFFIXES:
        stem = stem.removesuffix(suffix)
    return stem


def find(name: str) -> Path | None:
    """The file of the shipped space `name` names (NAME or NAME.yaml; a space in a subfolder also by its file's
    name alone, when no other has it), or None."""
    root, stem = folder(), _stem(name)
    known = names()
    if root is None or not stem:
        return None
    if stem in known:
        return root / f"{stem}.yaml"
    by_file = [n for n in known if n.rsplit("/", 1)[-1] == stem]
    return root / f"{by_file[0]}.yaml" if len(by_file) == 1 else None


def unknown(name: str, field: str, expected: str) -> SpecError:
    """The one-line error of a name that is neither a file nor a shipped space: the closest shipped names, and
    the first few of them all."""
    known = names()
    if not known:
        return SpecError(field, expected, name, "no such file, and this installation has no shipped spaces")
    stem = _stem(name)
    files = {n.rsplit("/", 1)[-1]: n for n in known}
    close = [files.get(c, c) for c in difflib.get_close_matches(stem, [*known, *files], n=3, cutoff=0.6)]
    close = list(dict.fromkeys(close))
    listed = ", ".join(known[:5]) + (", ..." if len(known) > 5 else "")
    listing = f"{listed} ({len(known)} in all: stitchsweep init --list)"
    if close:
        hint = f"no such file or shipped space; did you mean {' or '.join(close)}? Shipped: {listing}"
    else:
        hint = f"no such file or shipped space; shipped: {listing}"
    return SpecError(field, expected, name, hint)


def resolve(path: str) -> str:
    """A command's SPACE argument: `path` itself when it exists, else the file of the shipped space it names;
    neither: a SpecError naming SPACE with the closest shipped names."""
    if Path(path).exists():
        return path
    found = find(path)
    if found is None:
        raise unknown(path, "SPACE", "a search-space YAML file or the name of a shipped space")
    return str(found)


def includes(space: Path) -> list[Path]:
    """The files `space` includes, and those they include, each once (`include:` paths are relative to the file
    that names them)."""
    import yaml

    seen: list[Path] = []

    def walk(path: Path) -> None:
        try:
            raw = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError):
            return  # `plan` says what is wrong with it
        listed = raw.get("include") if isinstance(raw, dict) else None
        for f in [listed] if isinstance(listed, str) else listed if isinstance(listed, list) else []:
            inner = (path.parent / str(f)).resolve()
            if inner.is_file() and inner not in seen:
                seen.append(inner)
                walk(inner)

    walk(space)
    return seen


def description(space: Path) -> str:
    """The first line of a space's opening comment, or ""."""
    try:
        with space.open() as f:
            first = f.readline().strip()
    except OSError:
        return ""
    return first.lstrip("#").strip() if first.startswith("#") else ""


def copy_space(name: str, dest: Path) -> list[tuple[Path, bool]]:
    """Copy the shipped space `name`, and the files it includes at their paths relative to it, into the folder
    `dest` (made when missing): (each file there, whether it was written). A file already there with the same
    text is kept; one with other text is never overwritten: a SpecError names it, and nothing is written."""
    space = find(name)
    if space is None:
        raise unknown(name, "NAME", "the name of a shipped space")
    plan = [(space, dest / space.name)]
    for inner in includes(space):
        relative = Path(os.path.relpath(inner, space.parent))
        if relative.parts[0] == "..":
            raise SpecError("NAME", "a space whose includes lie in its folder", name, f"{inner} lies outside it")
        plan.append((inner, dest / relative))
    if dest.exists() and not dest.is_dir():
        raise SpecError("DEST", "a folder", str(dest), "a file")
    for src, target in plan:
        if target.exists() and (not target.is_file() or target.read_bytes() != src.read_bytes()):
            raise SpecError(
                "DEST",
                f"a folder without another {target.relative_to(dest).as_posix()} (init never overwrites)",
                str(target),
                "rename or remove it, or give another DEST",
            )
    done = []
    for src, target in plan:
        written = not target.exists()
        if written:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(src.read_bytes())
        done.append((target, written))
    return done
