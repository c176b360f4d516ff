"""Altair charts of stitching results. Charts are data in, `alt.Chart` out: test them via `to_dict()`.

The stitching plot (seed 000, Fig. 1): stitch points on x, ordered from "end model" (zero layers of the
front network) through every stitch point to "front model"; clean and robust accuracy of the stitched
networks on y (the mean over seeds); the interval between the two donors' clean accuracies as a blue band and
between their robust accuracies as a yellow band.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

END_LABEL = "end model"
FRONT_LABEL = "front model"
METRIC_COLORS = {"accuracy": "#1f77b4", "robust accuracy": "#e6a800"}


def stitching_data(trials: pd.DataFrame, front: str, end: str, objective: str) -> tuple[pd.DataFrame, list[str]]:
    """Long-format points (x, metric, value) of one stitching plot, and the x order."""
    t = trials[(trials["status"] == "done") & (trials["front"] == front) & (trials["end"] == end)
               & (trials["objective"] == objective)]
    if t.empty:
        return pd.DataFrame(columns=["x", "metric", "value", "n_seeds"]), [END_LABEL, FRONT_LABEL]
    order = (t[["front_point", "point_index"]].drop_duplicates().sort_values("point_index")["front_point"]
             .tolist())
    agg = t.groupby("front_point").agg(
        accuracy=("clean_acc", "mean"), robust=("robust_acc", "mean"), n_seeds=("seed", "nunique"),
        end_clean=("end_clean_acc", "first"), end_robust=("end_robust_acc", "first"),
        front_clean=("front_clean_acc", "first"), front_robust=("front_robust_acc", "first"))
    rows = []
    for point, r in agg.iterrows():
        rows.append({"x": point, "metric": "accuracy", "value": r["accuracy"], "n_seeds": r["n_seeds"]})
        if pd.notna(r["robust"]):
            rows.append({"x": point, "metric": "robust accuracy", "value": r["robust"], "n_seeds": r["n_seeds"]})
    first = agg.iloc[0]
    for label, clean, robust in ((END_LABEL, first["end_clean"], first["end_robust"]),
                                 (FRONT_LABEL, first["front_clean"], first["front_robust"])):
        if pd.notna(clean):
            rows.append({"x": label, "metric": "accuracy", "value": clean, "n_seeds": 1})
        if pd.notna(robust):
            rows.append({"x": label, "metric": "robust accuracy", "value": robust, "n_seeds": 1})
    return pd.DataFrame(rows), [END_LABEL, *order, FRONT_LABEL]


def stitching_plot(trials: pd.DataFrame, front: str, end: str, objective: str,
                   width: int = 320, height: int = 220) -> alt.LayerChart:
    """One stitching plot: stitched accuracies over stitch points with the donors' accuracy bands."""
    points, order = stitching_data(trials, front, end, objective)
    color = alt.Color("metric:N", title=None,
                      scale=alt.Scale(domain=list(METRIC_COLORS), range=list(METRIC_COLORS.values())))
    donors = points[points["x"].isin([END_LABEL, FRONT_LABEL])]
    bands = (donors.groupby("metric")["value"].agg(lo="min", hi="max").reset_index()
             if len(donors) else pd.DataFrame(columns=["metric", "lo", "hi"]))
    band = alt.Chart(bands).mark_rect(opacity=0.18).encode(
        y=alt.Y("lo:Q"), y2="hi:Q", color=color)
    lines = alt.Chart(points).mark_line(point=True).encode(
        x=alt.X("x:N", sort=order, title="stitch point", axis=alt.Axis(labelAngle=-40)),
        y=alt.Y("value:Q", title="accuracy", scale=alt.Scale(domain=[0, 1])),
        color=color,
        tooltip=["x:N", "metric:N", alt.Tooltip("value:Q", format=".3f"), "n_seeds:Q"],
    )
    title = f"{front} -> {end} ({objective})"
    return alt.layer(band, lines).properties(width=width, height=height, title=title)


def stitching_grid(trials: pd.DataFrame) -> alt.VConcatChart:
    """Stitching plots of every (front, end) pair (rows) and objective (columns)."""
    done = trials[trials["status"] == "done"]
    pairs = done[["front", "end"]].drop_duplicates().sort_values(["front", "end"]).itertuples(index=False)
    objectives = sorted(done["objective"].unique())
    rows = [alt.hconcat(*[stitching_plot(trials, p.front, p.end, o) for o in objectives]) for p in pairs]
    return alt.vconcat(*rows).resolve_scale(color="shared")
