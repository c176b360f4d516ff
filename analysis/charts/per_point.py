"""A study's own view of its stitching trials: every objective's accuracy over the stitch points in one panel per
donor pair (colour: the setting), with the donors' accuracies as reference lines, and each similarity index the
trials measured at their stitch point (`sim_<index>` columns, e.g. `sim_cka`) drawn beside it over the same
points, with the rank correlation of the two across the points (`analysis.stats.rank_correlation`, the test of
Balogh & Jelasity 2025 Tables 2-3)."""

from __future__ import annotations

import altair as alt
import pandas as pd

from analysis.charts.titles import PANEL_WIDTH, wrap_title
from analysis.stats import rank_correlation

KEYS = ["front", "end", "setting", "front_point", "point_index"]


def same_layer(trials: pd.DataFrame) -> pd.DataFrame:
    """The done trials that stitch a point to the same point (cross-layer trials belong to the layer matrices; a
    trial recorded before they existed has no end point and stitched to the same one)."""
    t = trials[trials["status"] == "done"] if "status" in trials else trials
    return t[t["end_point"].isna() | (t["end_point"] == t["front_point"])] if "end_point" in t else t


def indices(trials: pd.DataFrame) -> dict[str, str]:
    """Report label -> trials column of each pair index the trials measured (a value in some row)."""
    from sweep.store.catalogue import pair_entries

    return {e.label: e.column for e in pair_entries() if e.column in trials and trials[e.column].notna().any()}


def accuracy_rows(trials: pd.DataFrame) -> pd.DataFrame:
    """Per pair, setting, stitch point and metric (clean "accuracy"; "robust accuracy" where the trials measured
    one): the mean over seeds (`value`), its min and max (`lo`, `hi`), the seeds, and the donors' accuracies of
    that metric (`front_acc`, `end_acc`)."""
    t = same_layer(trials)
    columns = [*KEYS, "metric", "value", "lo", "hi", "seeds", "front_acc", "end_acc"]
    parts = []
    for metric, prefix in (("accuracy", "clean"), ("robust accuracy", "robust")):
        column = f"{prefix}_acc"
        if t.empty or column not in t or t[column].isna().all():
            continue
        agg = t.groupby(KEYS, dropna=False).agg(
            value=(column, "mean"),
            lo=(column, "min"),
            hi=(column, "max"),
            seeds=("seed", "nunique"),
            front_acc=(f"front_{column}", "first"),
            end_acc=(f"end_{column}", "first"),
        )
        parts.append(agg.reset_index().assign(metric=metric))
    if not parts:
        return pd.DataFrame(columns=columns)
    out = pd.concat(parts, ignore_index=True)[columns]
    return out.sort_values(["front", "end", "point_index", "setting", "metric"], ignore_index=True)


def index_rows(trials: pd.DataFrame) -> pd.DataFrame:
    """Per pair, stitch point and measured index: the index's mean over the trials at that point (`value`; an
    index compares the two donors, so every setting measures the same)."""
    t, measured = same_layer(trials), indices(trials)
    keys = ["front", "end", "front_point", "point_index"]
    parts = [
        t.groupby(keys)[column].mean().rename("value").reset_index().assign(index=label)
        for label, column in measured.items()
    ]
    if not parts:
        return pd.DataFrame(columns=[*keys, "index", "value"])
    return pd.concat(parts, ignore_index=True).sort_values(["front", "end", "index", "point_index"], ignore_index=True)


def correlations(trials: pd.DataFrame) -> pd.DataFrame:
    """Per pair, setting and index: Kendall's tau and Spearman's rho between the stitched accuracy (mean over
    seeds) and the index across the stitch points, one-sided towards "more similar, more accurate" (a distance:
    a negative correlation), with their p-values; `note` "constant" where either did not vary."""
    from sweep.store.catalogue import pair_entries

    columns = ["front", "end", "setting", "index", "points", "tau", "tau_p", "rho", "rho_p", "note"]
    acc, ind = accuracy_rows(trials), index_rows(trials)
    acc = acc[acc["metric"] == "accuracy"]
    if acc.empty or ind.empty:
        return pd.DataFrame(columns=columns)
    larger = {e.label: e.larger_is_more_similar for e in pair_entries()}
    both = acc.merge(ind, on=["front", "end", "front_point", "point_index"], suffixes=("_acc", "_index"))
    rows = []
    for (front, end, setting, index), g in both.groupby(["front", "end", "setting", "index"], sort=True):
        test = rank_correlation(g["value_acc"], g["value_index"], "greater" if larger.get(index, True) else "less")
        rows.append(dict(front=front, end=end, setting=setting, index=index, points=len(g)) | test)
    return pd.DataFrame(rows, columns=columns)


def _x(order: list[str]) -> alt.X:
    return alt.X("front_point:N", sort=order, title="stitch point", axis=alt.Axis(labelAngle=-40))


def accuracy_panel(acc: pd.DataFrame, order: list[str], title: str) -> alt.LayerChart:
    """Every setting's accuracy over the points (whiskers: min-max over seeds; robust accuracy, where measured,
    dashed) and the donors' own accuracies as grey reference lines."""
    colour = alt.Color("setting:N", title="setting")
    y = alt.Y("value:Q", title="stitched accuracy (mean over seeds)", scale=alt.Scale(domain=[0, 1]))
    tooltip = ["setting:N", "metric:N", "front_point:N", alt.Tooltip("value:Q", format=".3f"), "seeds:Q"]
    encoding = dict(x=_x(order), y=y, color=colour, tooltip=tooltip)
    if acc["metric"].nunique() > 1:  # a legend entry for robust accuracy only where some was measured
        encoding["strokeDash"] = alt.StrokeDash("metric:N", title="metric", sort=["accuracy", "robust accuracy"])
    lines = alt.Chart(acc).mark_line(point=True).encode(**encoding)
    whiskers = alt.Chart(acc[acc["seeds"] > 1]).mark_rule().encode(x=_x(order), y="lo:Q", y2="hi:Q", color=colour)
    first, several = acc.drop_duplicates("metric"), acc["metric"].nunique() > 1
    donors = pd.DataFrame(
        [
            {
                "donor": f"{side} {r[side]}" + (f" ({r['metric']})" if several else ""),
                "acc": r[f"{side}_acc"],
                "side": side,
            }
            for _, r in first.iterrows()
            for side in ("front", "end")
        ]  # fmt: skip
    ).dropna()
    reference = (
        alt.Chart(donors)
        .mark_rule(strokeDash=[4, 3], color="gray")
        .encode(y="acc:Q", tooltip=["donor:N", alt.Tooltip("acc:Q", format=".3f")])
    )
    # the front's label at the left end of its line, the end's at the right: two close lines stay readable
    labels = [
        alt.Chart(donors[donors["side"] == side])
        .mark_text(align=align, dx=dx, dy=-5, fontSize=10, color="gray")
        .encode(y="acc:Q", x=alt.value(x), text="donor:N")
        for side, align, dx, x in (("front", "left", 3, 0), ("end", "right", -3, 300))
    ]
    return alt.layer(reference, *labels, whiskers, lines).properties(width=300, height=200, title=title)


def index_panel(ind: pd.DataFrame, order: list[str], title: str | list[str]) -> alt.Chart:
    """Each index measured at the trials' stitch points, over the same points."""
    return (
        alt.Chart(ind)
        .mark_line(point=True, strokeDash=[6, 2])
        .encode(
            x=_x(order),
            y=alt.Y("value:Q", title="index at the stitch point"),
            color=alt.Color("index:N", title="index"),
            tooltip=["index:N", "front_point:N", alt.Tooltip("value:Q", format=".3f")],
        )
        .properties(width=300, height=200, title=title)
    )


def _rho_text(corr: pd.DataFrame) -> str:
    """'cka: rho 0.83 (tlm), 0.71 (dm)' for one pair's correlations."""
    parts = []
    for index, g in corr.groupby("index", sort=True):
        values = ", ".join(
            f"{'n/a' if pd.isna(r.rho) else f'{r.rho:.2f}'} ({r.setting})" for r in g.itertuples(index=False)
        )
        parts.append(f"{index}: rho {values}")
    return "; ".join(parts)


def overlay_grid(trials: pd.DataFrame) -> alt.VConcatChart:
    """A row per donor pair: every setting's accuracy in one panel (the donors' accuracies dashed), and beside it
    each index the trials measured at their stitch point, titled with its rank correlation with the accuracy."""
    acc, ind, corr = accuracy_rows(trials), index_rows(trials), correlations(trials)
    rows = []
    for (front, end), a in acc.groupby(["front", "end"], sort=True):
        order = a.sort_values("point_index")["front_point"].drop_duplicates().tolist()
        panels = [accuracy_panel(a, order, f"{front} -> {end}: accuracy by objective")]
        mine = ind[(ind["front"] == front) & (ind["end"] == end)]
        if len(mine):
            text = _rho_text(corr[(corr["front"] == front) & (corr["end"] == end)])
            panels.append(index_panel(mine, order, wrap_title(f"{front} -> {end}: {text}", PANEL_WIDTH)))
        rows.append(alt.hconcat(*panels).resolve_scale(color="independent"))
    return alt.vconcat(*rows)
