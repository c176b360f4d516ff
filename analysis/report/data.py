"""What the report's sections draw from: every table of a results directory, read and prepared once
(`ReportData`), and the trials no longer in the space set apart."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

import pandas as pd

from analysis.charts.stitching import is_cross_task, setting_label
from analysis.matrices import layer_identification, long_matrices
from analysis.reading import load
from analysis.stats import correlation_table, rank_correlations
from sweep.store.storage import Loc, open_root


@dataclass(frozen=True)
class ReportData:
    """What the sections draw from: every table of the results, prepared once."""

    name: str
    trials: pd.DataFrame
    donors: pd.DataFrame
    problems: pd.DataFrame
    reptests: pd.DataFrame
    similarity: pd.DataFrame
    training_similarity: pd.DataFrame
    donor_curves: pd.DataFrame
    inversions: pd.DataFrame = field(default_factory=pd.DataFrame)
    tsne: pd.DataFrame = field(default_factory=pd.DataFrame)
    energies: pd.DataFrame = field(default_factory=pd.DataFrame)
    examples: pd.DataFrame = field(default_factory=pd.DataFrame)
    root: Loc | None = None  # the results folder (files beside the tables: inverted images)
    # every table by name (`sweep.store.layout.tables()`), a registered kind's too: `table(name)`
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    def table(self, name: str) -> pd.DataFrame:
        """The results table `name` (empty when the results hold none)."""
        return self.tables.get(name, pd.DataFrame())

    def where(self, **settings) -> ReportData:
        """The same data restricted to rows whose columns equal `settings` (a list: any of its values), in every
        table that has those columns: e.g. `data.where(objective="tlm", front="zoo:plain_a")`."""

        def narrow(df):
            if isinstance(df, pd.DataFrame):
                for column, value in settings.items():
                    if column in df.columns:
                        df = df[df[column].isin(value if isinstance(value, (list, tuple, set)) else [value])]
            return df

        fields = {f.name: narrow(getattr(self, f.name)) for f in dataclasses.fields(self)}
        fields["tables"] = {name: narrow(df) for name, df in self.tables.items()}
        return ReportData(**fields)

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

    @functools.cached_property
    def matrices(self) -> pd.DataFrame:
        """Layer-by-layer matrices, when some front layer was stitched to more than one end layer."""
        long = long_matrices(self.done) if len(self.done) else pd.DataFrame()
        cross_layer = (
            len(long) and long.groupby(["front", "end", "measure", "front_point"])["end_point"].nunique().max() > 1
        )
        return long if cross_layer else pd.DataFrame()

    @functools.cached_property
    def identification(self) -> pd.DataFrame:
        return layer_identification(self.done) if len(self.done) else pd.DataFrame()

    @functools.cached_property
    def correlations_per_unit(self) -> pd.DataFrame:
        return rank_correlations(self.reptests) if len(self.reptests) else pd.DataFrame()

    @functools.cached_property
    def correlations(self) -> pd.DataFrame:
        return correlation_table(self.correlations_per_unit) if len(self.reptests) else pd.DataFrame()


def report_data(results, expected: dict | None = None) -> tuple[ReportData, pd.DataFrame]:
    """(every table of a results directory, prepared as the report draws it; the trials no longer in the
    space, when `expected` says which are)."""
    results = open_root(results)
    tables = load(results)
    trials, stale = _split_stale(tables["trials"], expected)
    trials = trials.assign(setting=setting_label(trials))
    tables["trials"] = trials
    named = {f.name: tables[f.name] for f in dataclasses.fields(ReportData) if f.name in tables}
    return ReportData(results.name, **named, root=results, tables=tables), stale


def _split_stale(trials: pd.DataFrame, expected: dict | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the trials of the space, those no longer in it); all trials when the space is not known."""
    if expected is None or "trial_ids" not in expected or trials.empty:
        return trials, trials.iloc[0:0]
    known = trials["trial_id"].isin(set(expected["trial_ids"]))
    return trials[known], trials[~known]
