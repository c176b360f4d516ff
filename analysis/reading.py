"""Read a results directory into pandas with the explicit schemas of `sweep.store.schema`.

Every part is cast to the known schema (columns a part lacks come back as nulls); columns a part has beyond
the schema are kept too, so nothing written is dropped silently. Temporary files (".tmp-*") are ignored.
`results` is a local folder or a pyarrow.fs URI (`s3://bucket/prefix/<sweep>`; see `sweep.store.storage`).
A part that cannot be read (truncated, not Parquet, not one of ours, types that do not cast) is skipped with a
warning naming its path, and listed in `load(...)["problems"]`: it never crashes a reader.

Each reader first imports the plugins the sweep kept (`RESULTS/space.yaml`'s `plugins:`, the copies `run`
keeps in `RESULTS/plugins/`), so that a plugin kind's table and a plugin index's columns are read as the CLI's
`report` reads them (`import_plugins`); `plugins=` names others, `plugins=False` none.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from sweep.store.compact import keep_winners
from sweep.store.layout import (
    CURRENT_FILE,
    CURVES_DIR,
    DONORS_DIR,
    KEPT_SUFFIX,
    SPACE_FILE,
    STALE_DIR,
    TRIALS_DIR,
    tables,
)
from sweep.store.schema import schema
from sweep.store.snapshot import FILE, PART, gather, read_part, to_schema
from sweep.store.storage import Loc, open_root

# what a reader's `plugins=` takes (`import_plugins`): None, a list of plugins, or False
Plugins = list | tuple | str | os.PathLike | bool | None


def import_plugins(results: str | os.PathLike | Loc, plugins: Plugins = None) -> list:
    """Import the plugins a reader of `results` needs before it reads (their registries are per process), and
    return them (`sweep.config.plugins.Plugin`s). `plugins`: None (or True) the ones the sweep kept, its
    `RESULTS/space.yaml`'s `plugins:` list, each relative to the results folder (none when it has no
    space.yaml: a bare trials folder); a list of plugins (files and package folders relative to the working
    directory, or module names, as `--plugin` takes them) to import instead; False or [] none. A plugin that
    does not import is skipped with a warning naming it and why; the rest are imported. Importing one again
    (a second `load`) keeps the first import's registrations."""
    from sweep.config.plugins import load_plugin

    if plugins is False:
        return []
    if plugins is None or plugins is True:
        kept = _kept_plugins(open_root(results))
    else:
        listed = [plugins] if isinstance(plugins, (str, os.PathLike)) else list(plugins)
        kept = [(os.fspath(s) if isinstance(s, os.PathLike) else s, Path.cwd()) for s in listed]
    loaded = []
    for i, (spec, base) in enumerate(kept):
        try:
            loaded.append(load_plugin(spec, base, f"plugins[{i}]"))
        except Exception as exc:  # a broken plugin costs its own tables and columns, not the reader
            warnings.warn(f"plugin {spec!r} not imported (its tables and columns are not read): {exc}", stacklevel=3)
    return loaded


def _kept_plugins(root: Loc) -> list[tuple[object, Path]]:
    """(each plugin the sweep's own space.yaml lists, the local folder it is imported relative to): the results
    folder itself, or for results on remote storage a local copy of the plugin (`localise`). A space that
    cannot be read is a warning and no plugin."""
    import yaml

    from sweep.config.plugins import MODULE, localise, plugin_form

    space = root / SPACE_FILE
    try:
        if not space.is_file():
            return []
        raw = yaml.safe_load(space.read_text())
    except (OSError, ValueError, yaml.YAMLError) as exc:
        warnings.warn(f"{space}: unreadable, the sweep's plugins are not imported ({exc})", stacklevel=4)
        return []
    specs = raw.get("plugins") if isinstance(raw, dict) else None
    if not specs:
        return []
    if not isinstance(specs, list):
        warnings.warn(f"{space}: plugins is not a list ({specs!r}): none is imported", stacklevel=4)
        return []
    if root.is_local:
        return [(spec, Path(root.path)) for spec in specs]
    kept = []
    for spec in specs:  # each copied on its own: one missing costs only itself
        try:
            by_name = not isinstance(spec, str) or plugin_form(spec, root) == MODULE  # nothing to copy
            kept.append((spec, Path.cwd() if by_name else localise(root, [spec])))
        except Exception as exc:
            warnings.warn(f"plugin {spec!r} not imported (its tables and columns are not read): {exc}", stacklevel=4)
    return kept


def _current(root: Loc, kind: str) -> set[str] | None:
    """The part names of `kind`'s table that the sweep's current space names (`RESULTS/current.json`, written by
    every run); None where no run recorded them (every part is read)."""
    try:
        return set(json.loads((root / CURRENT_FILE).read_text())[kind])
    except (OSError, ValueError, KeyError):
        return None


def _stale(root: Loc, kind: str, expected: pa.Schema, problems: list[dict] | None) -> list[pa.Table]:
    """The rows of the parts `RESULTS/_stale/<kind>/` keeps (units the space no longer names), each part's rows
    with its `_part` and `_file`."""
    out = []
    for f in (root / STALE_DIR / kind).files(KEPT_SUFFIX):
        try:
            t = read_part(f, kind, expected)
        except Exception as exc:
            if problems is not None:
                problems.append({"path": str(f), "kind": kind, "error": f"{type(exc).__name__}: {exc}"})
            continue
        name = pa.array([f.name[: -len(KEPT_SUFFIX)]] * t.num_rows, pa.string())
        out.append(t.append_column(PART, name).append_column(FILE, pa.array([f.name] * t.num_rows, pa.string())))
    return out


def read_table(
    results: str | os.PathLike | Loc,
    kind: str,
    problems: list[dict] | None = None,
    with_parts: bool = False,
    stale: bool = False,
    plugins: Plugins = None,
) -> pa.Table:
    """All parts of `kind` ("trials", "donors", "curves", a plugin kind's table, ...) as one Arrow table with a
    unified schema, in the parts' name order (`with_parts`: a `_part` column names each row's part, and `_file` the
    file it was read from). Parts compacted into one file (`sweep.store.compact`) are read like loose ones; a part
    recorded twice (a loose copy and a compacted one, or two compacted ones) counts once: the loose copy, else the
    newest compacted one. The rows of files unchanged since the last snapshot come from it
    (`sweep.store.snapshot.write_snapshot`, after each run).
    Unreadable files are skipped with a warning and appended to `problems` as {path, kind, error}.

    Only the rows of the units the sweep's space names are read (`RESULTS/current.json`: the parts of units
    an edited plugin or a shrunk space left behind are stale); `stale=True` adds the stale ones too (those a
    run moved to `RESULTS/_stale/` and any the tables still hold), with a boolean column `stale`.
    The sweep's kept plugins are imported first (`plugins`: `import_plugins`)."""
    root = open_root(results)
    import_plugins(root, plugins)
    expected = schema(kind)
    merged = gather(root, kind, problems)
    if merged is not None:
        merged = keep_winners(merged, FILE)
    current = _current(root, kind)
    kept = _stale(root, kind, expected, problems) if stale else []
    if merged is not None and current is not None:
        is_current = pa.compute.is_in(merged[PART], value_set=pa.array(sorted(current), pa.string()))
        kept += [merged.filter(pa.compute.invert(is_current))] if stale else []
        merged = merged.filter(is_current)
    if stale:
        flags = [pa.array([False] * (0 if merged is None else merged.num_rows), pa.bool_())] + [
            pa.array([True] * t.num_rows, pa.bool_()) for t in kept
        ]
        parts = ([] if merged is None else [merged]) + [to_schema(t, expected) for t in kept]
        merged = pa.concat_tables(parts, promote_options="permissive") if parts else None
        merged = merged.append_column("stale", pa.concat_arrays(flags)) if merged is not None else None
    if merged is None:
        empty = expected.empty_table()
        names = pa.array([], pa.string())
        return empty.append_column(PART, names).append_column(FILE, names) if with_parts else empty
    merged = merged.sort_by(PART)
    return merged if with_parts else merged.drop_columns([PART, FILE])


def load_trials(results: str | os.PathLike | Loc, plugins: Plugins = None) -> pd.DataFrame:
    """One row per recorded trial (done and failed), with the columns of every index registered (`plugins`:
    `import_plugins`)."""
    return read_table(results, TRIALS_DIR, plugins=plugins).to_pandas()


def load_donors(results: str | os.PathLike | Loc, plugins: Plugins = None) -> pd.DataFrame:
    """One row per donor and evaluation setting; the latest record of each when evaluated more than once."""
    return _latest_donors(read_table(results, DONORS_DIR, plugins=plugins).to_pandas())


def _latest_donors(df: pd.DataFrame) -> pd.DataFrame:
    if len(df):
        # rows written before `eval_id` existed are told apart by the settings they did record
        key = df["eval_id"].fillna(df["eps"].astype(str) + "/" + df["n_eval_robust"].astype(str))
        df = (
            df.assign(_key=key)
            .sort_values("finished_at")
            .drop_duplicates(["donor", "donor_key", "_key"], keep="last")
            .drop(columns="_key")
        )
    return df.reset_index(drop=True)


def load_curves(results: str | os.PathLike | Loc, plugins: Plugins = None) -> pd.DataFrame:
    """Training curves in long format: trial_id, epoch, metric, value."""
    return read_table(results, CURVES_DIR, plugins=plugins).to_pandas()


def load_reptests(results: str | os.PathLike | Loc, plugins: Plugins = None) -> pd.DataFrame:
    """Representation-test rows: one per unit and member (Balogh & Jelasity 2025 Section 5)."""
    return read_table(results, "reptests", plugins=plugins).to_pandas()


def load_similarity(results: str | os.PathLike | Loc, plugins: Plugins = None) -> pd.DataFrame:
    """Similarity-unit rows (Cianfarani et al. 2022): one per unit and (A point, B point)."""
    return read_table(results, "similarity", plugins=plugins).to_pandas()


def load(results: str | os.PathLike | Loc, stale: bool = False, plugins: Plugins = None) -> dict[str, pd.DataFrame]:
    """Every table of a results directory (`tables()`: each registered kind's, then curves, donor_curves and
    energies), plus "problems": the parts that could not be read (path, kind, error), empty when every part is
    fine. Each table holds the units of the sweep's current space; `stale=True` adds those of units it no
    longer names (an edited plugin's earlier version, a shrunk space), marked by a boolean column `stale`.

    The plugins the sweep kept are imported first, so that their kinds' tables and their indices' columns are
    read (`plugins`: None those the sweep's space.yaml lists; a list of plugins to import instead, as
    `--plugin` takes them; False none: `import_plugins`). One that fails to import is a warning."""
    problems: list[dict] = []
    root = open_root(results)
    import_plugins(root, plugins)  # its warnings shown: the reading's own are reported through "problems"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reported through "problems" instead
        read = {name: read_table(root, name, problems, stale=stale, plugins=False).to_pandas() for name in tables()}
    read["donors"] = _latest_donors(read["donors"])
    return {**read, "problems": pd.DataFrame(problems, columns=["path", "kind", "error"])}
