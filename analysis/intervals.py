"""Uncertainty over runs, one rule for every figure and table that has no band of its paper's: the mean with a
95% percentile-bootstrap interval of the mean (2,000 resamples, a fixed seed: the report is reproducible), or,
with fewer than 3 values, their min and max, and the label says which. A figure that reproduces a paper keeps
the paper's band instead (min-max over runs in Balogh & Jelasity 2023's and Smith & Marcu 2024's accuracy
plots, +-1 std in Smith & Marcu's rank plots)."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

BOOTSTRAP = "95% bootstrap CI"
MINMAX = "min-max (fewer than 3 values)"
RESAMPLES = 2000


def interval(values, seed: int = 0) -> tuple[float, float, str]:
    """(lo, hi, how) for the mean of `values` (NaNs dropped); (nan, nan, '') for none."""
    v = np.asarray(pd.Series(values, dtype=float).dropna())
    if len(v) == 0:
        return float("nan"), float("nan"), ""
    if len(v) < 3:
        return float(v.min()), float(v.max()), MINMAX
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, len(v), size=(RESAMPLES, len(v)))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi), BOOTSTRAP


def with_interval(df: pd.DataFrame, keys: list[str], value: str) -> pd.DataFrame:
    """Per group of `keys`: the mean of `value` (as `value`), its interval (`lo`, `hi`), how it was made
    (`interval`) and how many values (`n`)."""
    rows = []
    for key, g in df.groupby(keys, sort=False):
        lo, hi, how = interval(g[value])
        key = key if isinstance(key, tuple) else (key,)
        rows.append(
            {
                **dict(zip(keys, key)),
                value: g[value].mean(),
                "lo": lo,
                "hi": hi,
                "interval": how,
                "n": g[value].notna().sum(),
            }
        )
    return pd.DataFrame(rows, columns=[*keys, value, "lo", "hi", "interval", "n"])


def banded_lines(
    rows: pd.DataFrame,
    x: alt.X,
    y: alt.Y,
    colour: alt.Color,
    tooltip: list,
    facet: str,
    columns: int,
    size: tuple[int, int] = (260, 200),
    opacity: float = 0.2,
) -> alt.FacetChart:
    """Lines with their shaded bands (`lo` to `hi`), a colour per series and a panel per value of `facet`: the
    one shape of every curve with an interval in the report (Cianfarani et al. Fig. 6, Jones et al. Figs 7-8)."""
    band = alt.Chart().mark_area(opacity=opacity).encode(x=x, y="lo:Q", y2="hi:Q", color=colour)
    line = alt.Chart().mark_line(point=True).encode(x=x, y=y, color=colour, tooltip=tooltip)
    return (
        alt.layer(band, line, data=rows)
        .properties(width=size[0], height=size[1])
        .facet(facet=alt.Facet(f"{facet}:N", title=None), columns=columns)
    )
