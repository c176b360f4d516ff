"""What the report's sections draw from: every table of a results directory, read and prepared once
(`ReportData`), and the trials no longer in the space set apart."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from analysis.charts.stitching import is_cross_task, setting_label
from analysis.reading import Plugins, load
from sweep.store.layout import DONORS_DIR, TRIALS_DIR
from sweep.store.layout import tables as store_tables
from sweep.store.storage import Loc, open_root

PROBLEMS = "problems"  # beside the tables: the parts that could not be read (`analysis.load`)


@dataclass(frozen=True)
class ReportData:
    """What the sections draw from: every table of the results by name (`table(name)`; a registered kind's as
    `of(kind)`), prepared once. The trials and donors, which most sections read, are also properties, and any
    table an attribute (`data.similarity`), for a notebook."""

    name: str
    # every table by name (`sweep.store.layout.tables()`: each registered kind's, then the store's; "problems")
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    root: Loc | None = None  # the results folder (files beside the tables: inverted images)

    def table(self, name: str) -> pd.DataFrame:
        """The results table `name` (empty when the results hold none)."""
        return self.tables.get(name, pd.DataFrame())

    def of(self, kind: str) -> pd.DataFrame:
        """The table of the registered kind of work `kind` (its `Kind.table`)."""
        from sweep.registry import KINDS

        return self.table(KINDS[kind].table)

    def __getattr__(self, name: str) -> pd.DataFrame:
        """A results table as an attribute (`data.similarity`): those the results hold, and every table the
        store knows (empty when the results hold none)."""
        if name.startswith("_") or name in ("name", "tables", "root"):
            raise AttributeError(name)
        if name in self.tables or name in store_tables():
            return self.table(name)
        raise AttributeError(f"{type(self).__name__!r} has no attribute or table {name!r}")

    @property
    def trials(self) -> pd.DataFrame:
        return self.table(TRIALS_DIR)

    @property
    def donors(self) -> pd.DataFrame:
        return self.table(DONORS_DIR)

    @property
    def problems(self) -> pd.DataFrame:
        """The parts that could not be read (path, kind, error)."""
        return self.table(PROBLEMS)

    def derived(self, compute: Callable[[ReportData], pd.DataFrame]) -> pd.DataFrame:
        """`compute(self)`, computed once for this data: what a kind prepares from its table for several of its
        sections."""
        memo = self.__dict__.setdefault("_derived", {})
        if compute not in memo:
            memo[compute] = compute(self)
        return memo[compute]

    def where(self, **settings) -> ReportData:
        """The same data restricted to rows whose columns equal `settings` (a list: any of its values), in every
        table that has those columns: e.g. `data.where(objective="tlm", front="zoo:plain_a")`."""

        def narrow(df):
            if isinstance(df, pd.DataFrame):
                for column, value in settings.items():
                    if column in df.columns:
                        df = df[df[column].isin(value if isinstance(value, (list, tuple, set)) else [value])]
            return df

        return ReportData(self.name, {name: narrow(df) for name, df in self.tables.items()}, self.root)

    @functools.cached_property
    def done(self) -> pd.DataFrame:
        return self.trials[self.trials["status"] == "done"]

    @functools.cached_property
    def failed(self) -> pd.DataFrame:
        return self.trials[self.trials["status"] == "failed"]

    @functools.cached_property
    def same_task(self) -> pd.DataFrame:
        return self.done[~is_cross_task(self.done)]

    @functools.cached_property
    def cross_task(self) -> pd.DataFrame:
        return self.done[is_cross_task(self.done)]


def report_data(results, expected: dict | None = None, plugins: Plugins = None) -> tuple[ReportData, pd.DataFrame]:
    """(every table of a results directory, prepared as the report draws it; the trials no longer in the
    space, when `expected` says which are). The sweep's kept plugins are imported first (`plugins`:
    `analysis.reading.import_plugins`)."""
    results = open_root(results)
    tables = load(results, plugins=plugins)
    trials, stale = _split_stale(tables[TRIALS_DIR], expected)
    trials = trials.assign(setting=setting_label(trials))
    tables[TRIALS_DIR] = trials
    return ReportData(results.name, tables, root=results), stale


def _split_stale(trials: pd.DataFrame, expected: dict | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the trials of the space, those no longer in it); all trials when the space is not known."""
    if expected is None or "trial_ids" not in expected or trials.empty:
        return trials, trials.iloc[0:0]
    known = trials["trial_id"].isin(set(expected["trial_ids"]))
    return trials[known], trials[~known]
