"""What a sweep holds on disk (`stitchsweep du`) and what of it no unit needs (`stitchsweep prune`).

Every file under the sweep's folder and the root's zoo is put in one category (a table's parts, zoo checkpoints,
kept epochs, inversion shards, ...), from one recursive listing of each through the store's storage layer, so a
local folder and a `pyarrow.fs` URI are counted alike. What a unit reads is decided from the spaces of every
sweep under the root, because the zoo is shared by them all: a checkpoint or kept epoch that another sweep's
units read is needed. A table's Parquet part is never a candidate for removal: `analysis.load` reads its rows.

The node cache's files are this sweep's, other sweeps' or unrecorded, by the records that the workers of each
sweep under the root wrote (`sweep.worker.cache.RECORD_DIR`): `prune --cache` removes only this sweep's files
that no other sweep's record lists.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field

import pyarrow.fs as pafs

from sweep.store.layout import (
    CHECKPOINT_FILE,
    INVERTED_DIR,
    PART_SUFFIX,
    RAY_DIR,
    SET_ASIDE_DIR,
    SNAPSHOT_DIR,
    SPACE_FILE,
    STALE_DIR,
    STITCHERS_DIR,
    ZOO_DIR,
    SweepDir,
    tables,
)
from sweep.store.results import CORRUPT_SUFFIX
from sweep.store.storage import TMP_PREFIX, Loc, open_root
from sweep.worker.cache import RECORD_DIR

TEMPORARY = "temporary files"
SET_ASIDE = "set-aside parts"
STALE = "stale parts"  # of units the sweep's space no longer names (`sweep.planning.current`)
CHECKPOINTS = "zoo checkpoints"
KEPT_EPOCHS = "kept epochs"
CACHE_RECORDS = "node cache records"
CACHE_MINE = "node cache: this sweep's"
CACHE_OTHERS = "node cache: other sweeps'"
CACHE_UNRECORDED = "node cache: unrecorded"


@dataclass(frozen=True)
class Entry:
    """One file: where it is, its size, its category and (zoo files) the donor key and kept epoch."""

    loc: Loc
    size: int
    category: str
    donor_key: str | None = None
    epoch: int | None = None
    also_others: bool = False  # a node-cache file of this sweep that another sweep's record lists too


@dataclass
class Needs:
    """What the units of every sweep under a root read from the zoo; `known` False when a space could not be
    read (then nothing of the zoo is a candidate)."""

    donor_keys: set[str] = field(default_factory=set)
    epochs: set[tuple[str, int]] = field(default_factory=set)
    known: bool = True
    unreadable: list[str] = field(default_factory=list)


def _listing(folder: Loc) -> list[pafs.FileInfo]:
    sel = pafs.FileSelector(folder.path, allow_not_found=True, recursive=True)
    return [i for i in folder.fs.get_file_info(sel) if i.type == pafs.FileType.File]


def _sweep_category(rel: str) -> str:
    """The category of a file at `rel` (posix, relative to the sweep's folder)."""
    name, top = posixpath.basename(rel), rel.split("/", 1)[0]
    if name.startswith(TMP_PREFIX):
        return TEMPORARY
    if name.endswith(CORRUPT_SUFFIX) or top == SET_ASIDE_DIR:
        return SET_ASIDE
    if top == STALE_DIR:
        return STALE
    if top in tables() and "/" in rel and name.endswith(PART_SUFFIX) and not name.startswith("."):
        return f"{top} parts"
    if top == INVERTED_DIR:
        return "inversion shards"
    named = {STITCHERS_DIR: "stitchers", SNAPSHOT_DIR: "reader snapshots", RAY_DIR: "ray records"}
    named[RECORD_DIR] = CACHE_RECORDS
    return named.get(top, "space and other files")


def _zoo_entry(info: pafs.FileInfo, zoo: Loc) -> Entry:
    rel = posixpath.relpath(info.path, zoo.path)
    key, _, inside = rel.partition("/")
    loc, size = Loc(zoo.fs, info.path), int(info.size or 0)
    if info.base_name.startswith(TMP_PREFIX):
        return Entry(loc, size, TEMPORARY, key)
    if inside == CHECKPOINT_FILE:
        return Entry(loc, size, CHECKPOINTS, key)
    if inside.startswith("epochs/epoch-") and inside.endswith(".pt"):
        epoch = int(inside[len("epochs/epoch-") : -len(".pt")])
        return Entry(loc, size, KEPT_EPOCHS, key, epoch)
    return Entry(loc, size, "zoo training states and predictions", key)


def files(sweep_dir: SweepDir) -> list[Entry]:
    """Every file of the sweep's folder and of the root's zoo, each with its category."""
    out = [
        Entry(
            Loc(sweep_dir.path.fs, i.path),
            int(i.size or 0),
            _sweep_category(posixpath.relpath(i.path, sweep_dir.path.path)),
        )
        for i in _listing(sweep_dir.path)
    ]
    zoo = sweep_dir.root / ZOO_DIR
    return out + [_zoo_entry(i, zoo) for i in _listing(zoo)]


@dataclass
class Records:
    """The node-cache files that the workers of the sweeps under a root recorded using: this sweep's, the other
    sweeps', and the record files that could not be read (then no cache file is a candidate for removal)."""

    mine: set[str] = field(default_factory=set)
    others: set[str] = field(default_factory=set)
    unreadable: list[str] = field(default_factory=list)


def records(sweep_dir: SweepDir) -> Records:
    """The records of every sweep folder under the root (`<sweep>/_cache_keys/*.json`: each a worker process's
    `{"files": [names], ...}`), this sweep's apart from the others'."""
    out = Records()
    for folder in sweep_dir.root.glob("*"):
        names = out.mine if folder.name == sweep_dir.name else out.others
        for f in (folder / RECORD_DIR).glob("*.json"):
            try:
                names.update(str(n) for n in json.loads(f.read_text())["files"])
            except (OSError, ValueError, KeyError, TypeError) as exc:
                out.unreadable.append(f"{f}: {type(exc).__name__}")
    return out


def cache_files(folder, recorded: Records | None = None) -> list[Entry]:
    """The node cache's files (a local folder: `STITCHSWEEP_CACHE_DIR`, see `sweep.worker.cache`), each this
    sweep's, other sweeps' or unrecorded by `recorded`'s lists."""
    if folder is None:
        return []
    loc, recorded = open_root(str(folder)), recorded or Records()
    out = []
    for i in _listing(loc):
        name = i.base_name
        category = CACHE_MINE if name in recorded.mine else CACHE_OTHERS if name in recorded.others else None
        also = category == CACHE_MINE and name in recorded.others
        out.append(Entry(Loc(loc.fs, i.path), int(i.size or 0), category or CACHE_UNRECORDED, also_others=also))
    return out


def cache_lines(cache: list[Entry], folder, gone: list[Entry] | None = None) -> list[str]:
    """`du`'s (`gone` None) or `prune --cache`'s account of the node cache: this sweep's entries apart from the
    rest; for `prune`, what stays there and why."""

    def count(entries: list[Entry]) -> str:
        return f"{len(entries)} files, {human(sum(e.size for e in entries))}"

    mine = [e for e in cache if e.category == CACHE_MINE]
    if gone is None:
        rest = [e for e in cache if e.category != CACHE_MINE]
        return [f"this sweep's cache entries: {count(mine)}; other entries in the cache folder {folder}: {count(rest)}"]
    removed = {e.loc.path for e in gone}
    kept = {
        "of this sweep that another sweep's record lists": [e for e in mine if e.loc.path not in removed],
        "of other sweeps": [e for e in cache if e.category == CACHE_OTHERS],
        "unrecorded (no sweep under the root lists them)": [e for e in cache if e.category == CACHE_UNRECORDED],
    }
    return [f"kept in the cache folder {folder}: " + "; ".join(f"{count(v)} {k}" for k, v in kept.items())]


def needs(root: Loc) -> Needs:
    """What the units of every sweep under `root` (each folder with a space file) read from the zoo."""
    from sweep.config.space import load_space
    from sweep.registry import KINDS, resolve

    out = Needs()
    for folder in root.glob("*"):
        if not (folder / SPACE_FILE).is_file():
            continue
        try:
            sweep = load_space(folder / SPACE_FILE)
        except Exception as exc:  # a space this engine cannot read (a plugin missing, ...): keep the whole zoo
            out.known = False
            out.unreadable.append(
                f"{folder.name}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            )
            continue
        out.donor_keys.update(d.donor_key for d in sweep.donors.values())
        for kind in (k for k in KINDS.values() if k.epochs is not None):  # the kept epochs units read
            for unit in kind.units(sweep).values():
                out.epochs.update(resolve(kind.epochs)(unit))
    return out


def summary(entries: list[Entry]) -> dict[str, dict[str, int]]:
    """Category -> {"files": count, "bytes": total size}, categories sorted by name."""
    out: dict[str, dict[str, int]] = {}
    for e in entries:
        row = out.setdefault(e.category, {"files": 0, "bytes": 0})
        row["files"] += 1
        row["bytes"] += e.size
    return dict(sorted(out.items()))


def removable(entries: list[Entry], need: Needs, zoo_unused: bool, cache: bool, stale: bool = False) -> list[Entry]:
    """The files no unit needs: temporary files, set-aside parts, kept epochs no unit reads, with `zoo_unused`
    every zoo file of a donor no unit reads, with `cache` the node cache's files of this sweep that no other sweep's
    record lists, with `stale` the parts of units the space no longer names. Never a table's part."""
    out = []
    for e in entries:
        if e.category == STALE and stale:
            out.append(e)
        if e.category.endswith(" parts") and e.category != SET_ASIDE:
            continue  # a part a row is read from, or a stale one kept
        unused_donor = need.known and e.donor_key is not None and e.donor_key not in need.donor_keys
        if e.category in (TEMPORARY, SET_ASIDE) or (e.category == CACHE_MINE and cache and not e.also_others):
            out.append(e)
        elif e.category == KEPT_EPOCHS and need.known and (e.donor_key, e.epoch) not in need.epochs:
            out.append(e)
        elif zoo_unused and unused_donor:
            out.append(e)
    return out


def human(n: int) -> str:
    """Bytes as a short size: 512 B, 3.4 KiB, 1.2 GiB."""
    size, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"


def lines(table: dict[str, dict[str, int]]) -> list[str]:
    """`du`'s and `prune`'s printed table: category, files, size; then the total."""
    width = max([len(k) for k in table] + [5])
    out = [f"{k:<{width}}  {v['files']:>7} files  {human(v['bytes']):>10}" for k, v in table.items()]
    n, b = sum(v["files"] for v in table.values()), sum(v["bytes"] for v in table.values())
    return out + [f"{'total':<{width}}  {n:>7} files  {human(b):>10}"]
