"""Donors' training curves averaged over the donors that differ only in their seed (Cianfarani et al. 2022
Fig. 6's loss curves, averaged over training seeds), with the intervals of `analysis.intervals`."""

from __future__ import annotations

import altair as alt
import pandas as pd

from analysis.charts.stitching import epoch_axis
from analysis.intervals import banded_lines, with_interval

RECIPE = ["dataset", "arch", "training", "train_eps", "epochs", "freeze"]  # what a group's donors share


def mean_curves(curves: pd.DataFrame, donors: pd.DataFrame) -> pd.DataFrame:
    """Per group of donors with one training recipe (all but the seed) and per loss and epoch: the mean over the
    group's donors, its interval (`lo`, `hi`, `interval`) and how many donors (`n`). `group` names the recipe:
    training method, eps, architecture (and freezing)."""
    if curves.empty or donors.empty:
        return pd.DataFrame()
    recipe = [c for c in RECIPE if c in donors]
    own = donors.drop_duplicates("donor_key")[["donor_key", *recipe]]
    losses = curves.loc[curves["metric"].str.endswith("loss"), ["donor_key", "epoch", "metric", "value"]]
    d = losses.merge(own, on="donor_key", how="inner")
    if d.empty:
        return pd.DataFrame()

    def label(r) -> str:
        eps = "" if pd.isna(r.get("train_eps")) else f" eps {r['train_eps']:g}"
        frozen = "" if pd.isna(r.get("freeze")) else f", frozen {r['freeze']}"
        return f"{r['training']}{eps} {r['arch']} ({r['dataset']}){frozen}"

    d = d.assign(group=d.apply(label, axis=1))
    return with_interval(d, ["group", "metric", "epoch"], "value").rename(columns={"n": "donors"})


def mean_curve_chart(rows: pd.DataFrame) -> alt.FacetChart:
    """A panel per recipe, a line per loss (training, validation, adversarial validation), its band the interval
    over the recipe's donors (labelled in the y title)."""
    how = " / ".join(sorted(set(rows["interval"].dropna()) - {""}))
    colour = alt.Color("metric:N", title="loss")
    y = alt.Y("value:Q", title=f"loss, mean over seeds (band: {how or 'one donor'})")
    tooltip = ["group:N", "metric:N", "epoch:Q", alt.Tooltip("value:Q", format=".3f"), "donors:Q"]
    x = alt.X("epoch:Q", title="epoch", axis=epoch_axis(rows["epoch"]))
    return banded_lines(rows, x, y, colour, tooltip, "group", columns=3, size=(260, 180))
