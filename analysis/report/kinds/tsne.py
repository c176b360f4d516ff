"""The t-SNE units' part of the report (Balogh & Jelasity 2023 Fig. 7): the maps of a donor's points."""

from __future__ import annotations

import altair as alt
import pandas as pd

from analysis.report.sections import ChartSection


def tsne_chart(points: pd.DataFrame) -> alt.FacetChart:
    """t-SNE maps (Balogh & Jelasity 2023 Fig. 7): a row per donor, a column per point, a dot per image coloured
    by its class."""
    order = points.sort_values("point_index")["point"].drop_duplicates().tolist()
    return (
        alt.Chart(points[["donor", "point", "x", "y", "label"]])
        .mark_circle(size=8, opacity=0.7)
        .encode(
            x=alt.X("x:Q", axis=None),
            y=alt.Y("y:Q", axis=None),
            color=alt.Color("label:N", title="class"),
            tooltip=["donor:N", "point:N", "label:N"],
        )
        .properties(width=150, height=150)
        .facet(row=alt.Row("donor:N", title=None), column=alt.Column("point:N", sort=order, title=None))
        .resolve_scale(x="independent", y="independent")
    )


def _done(points: pd.DataFrame) -> pd.DataFrame:
    return points[points["status"] == "done"] if len(points) else points


CHARTS = [
    ChartSection(
        "t-SNE of the representations (Balogh & Jelasity 2023 Fig. 7): a row per network, a column per point",
        lambda d: _done(d.of("tsne")),
        tsne_chart,
        "tsne.png",
        order=180,
    ),
]


def sections() -> list[ChartSection]:
    return list(CHARTS)
