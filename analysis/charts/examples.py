"""Pictures of the `examples` units (Smith & Marcu 2024 Fig. 1a, Figs A1-A2; Cianfarani et al. 2022 Fig. 8):
each unit's rows placed in a grid by (panel, row, column), one chart per panel, stacked."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from analysis.charts.robustness import png_url


def pictures(examples: pd.DataFrame) -> pd.DataFrame:
    """The done units' pictures as PNG data URLs: name (the entry's), panel, row, column, label, pred, height,
    url; panels by name,
    a panel's rows in the order of its entry's units (`position`), each unit's rows in the order written."""
    if examples.empty:
        return pd.DataFrame()
    done = examples[examples["status"] == "done"].drop_duplicates(["unit_id", "panel", "row", "column"])
    done = done.sort_values(["panel", "position"], kind="stable")
    out = []
    for r in done.itertuples(index=False):
        image = np.frombuffer(r.pixels, dtype=np.uint8).reshape(r.channels, r.height, r.width) / 255.0
        out.append(dict(name=r.name, panel=r.panel, row=r.row, column=int(r.column), label=r.label, pred=r.pred,
                        height=int(r.height), url=png_url(image)))  # fmt: skip
    return pd.DataFrame(out)


def examples_chart(pics: pd.DataFrame) -> alt.VConcatChart:
    """One grid per panel: its rows top to bottom in the order written, its columns left to right; each picture
    drawn at twice its pixel size (between 32 and 96 pixels), with its class (and prediction) on hover."""
    charts = []
    for panel, mine in pics.groupby("panel", sort=False):
        size = int(np.clip(2 * mine["height"].max(), 32, 96))
        order = mine["row"].drop_duplicates().tolist()
        charts.append(
            alt.Chart(mine.drop(columns=["height", "name"]))
            .mark_image(width=size, height=size, smooth=False)  # pixels as they are, not interpolated
            .encode(
                x=alt.X("column:O", title=None, axis=alt.Axis(labels=False, ticks=False)),
                y=alt.Y("row:N", sort=order, title=None),
                url="url:N",
                tooltip=["row:N", "label:Q", "pred:Q"],
            )
            .properties(title=str(panel), width=(size + 4) * (mine["column"].max() + 1), height=(size + 4) * len(order))
        )
    return alt.vconcat(*charts)
