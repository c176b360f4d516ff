"""Altair charts of stitching results. Charts are data in, `alt.Chart` out: test them via `to_dict()`.

The stitching plot (Balogh & Jelasity 2023, Fig. 1-3, 5): stitch points on x, ordered from "end model" (zero layers of
the front network) through every stitch point to "front model"; clean and robust accuracy of the stitched
networks on y (the mean over seeds); the interval between the two donors' clean accuracies as a blue band and
between their robust accuracies as a yellow band. One panel per donor pair (rows) and *setting* (columns): the
objective with the options that tell its runs apart (alpha, beta, init, stitcher, the data it was trained on).

The class-collapse plot (Fig. 4, 6): the ratio of the most often predicted class over the test set per stitch
point, with the 1/num_classes line of an unbiased classifier. The cross-task plot (Fig. 8): stitching plots
of pairs whose donors were trained on different datasets, one column per dataset the stitcher trained on.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from analysis.charts.per_point import same_layer
from analysis.charts.titles import PANEL_WIDTH, wrap_title

END_LABEL = "end model"
FRONT_LABEL = "front model"
METRIC_COLORS = {"accuracy": "#1f77b4", "robust accuracy": "#e6a800"}


def epoch_axis(epochs: pd.Series, most: int = 20) -> alt.Axis:
    """An axis of whole epochs: a tick at each of up to `most` epochs (2 epochs tick at 1 and 2, not 1.0, 1.2,
    ...), else ticks at least one epoch apart."""
    epochs = pd.to_numeric(epochs, errors="coerce").dropna()
    if len(epochs) and epochs.max() - epochs.min() < most:
        return alt.Axis(values=list(range(int(epochs.min()), int(epochs.max()) + 1)), format="d")
    return alt.Axis(tickMinStep=1, format="d")


# Columns that never tell two curves' settings apart: identity and status, the x axis (stitch points), the
# panel rows (the donor pair), what the seed varies over, per-trial bookkeeping, and the metrics.
NOT_A_SETTING = {
    "trial_id",
    "sweep",
    "status",
    "error",
    "front",
    "end",
    "front_key",
    "end_key",
    "seed",
    "front_point",
    "end_point",
    "point_index",
    "n_points",
    "end_index",
    "n_end_points",
    "split_id",
    "dataset",
    "front_dataset",
    "end_dataset",
    "stitch_data",
    "channels_last",
    "objective",
}


def _config_columns(trials: pd.DataFrame) -> list[str]:
    """The configuration columns of the trials table (everything before the first metric)."""
    from sweep.store.schema import trial_schema

    names = trial_schema().names
    config = names[: names.index("clean_acc")]
    return [c for c in config if c in trials.columns and c not in NOT_A_SETTING]


def setting_label(trials: pd.DataFrame) -> pd.Series:
    """'adv alpha=0.5', 'trades beta=1', 'tlm init=identity', 'tlm on digits', 'tlm lr=0.01': the objective
    plus every configuration column (but the seed, the stitch points and the pair) that tells its runs apart.
    alpha, beta, a non-default init or stitcher and the data of a cross-task stitch are always named; any other
    setting is named where trials of the same objective differ in it, so two blocks that differ only in
    `lr` or `donor_bn` never average into one curve."""
    if trials.empty:
        return pd.Series([], dtype=str, index=trials.index)
    varying: dict[str, list[str]] = {}
    for objective, group in trials.groupby("objective", dropna=False):
        varying[objective] = [
            c
            for c in _config_columns(group)
            if c not in ("alpha", "beta", "init", "stitcher") and group[c].astype(str).nunique(dropna=False) > 1
        ]

    def one(r) -> str:
        parts = [str(r.get("objective"))]
        if pd.notna(r.get("alpha")):
            parts.append(f"alpha={r['alpha']:g}")
        if pd.notna(r.get("beta")):
            parts.append(f"beta={r['beta']:g}")
        if pd.notna(r.get("init")) and r.get("init") != "random":
            parts.append(f"init={r['init']}")
        if pd.notna(r.get("stitcher")) and r.get("stitcher") != "affine":
            parts.append(str(r["stitcher"]))
        if r.get("stitch_data") in ("front", "end") and r.get("front_dataset") != r.get("end_dataset"):
            parts.append(f"on {r['dataset']}")
        for c in varying.get(r.get("objective"), []):
            value = r.get(c)
            parts.append(f"{c}={value:g}" if isinstance(value, float) and pd.notna(value) else f"{c}={value}")
        return " ".join(parts)

    return trials.apply(one, axis=1)


def _with_setting(trials: pd.DataFrame) -> pd.DataFrame:
    return trials if "setting" in trials.columns else trials.assign(setting=setting_label(trials))


def _panel(trials: pd.DataFrame, front: str, end: str, setting: str) -> pd.DataFrame:
    """One stitching plot's trials: same-layer stitching only (cross-layer trials belong to the matrices)."""
    t = _with_setting(same_layer(trials))
    return t[(t["front"] == front) & (t["end"] == end) & (t["setting"] == setting)]


def stitching_data(trials: pd.DataFrame, front: str, end: str, setting: str) -> tuple[pd.DataFrame, list[str]]:
    """Long-format points (x, metric, value: the mean over seeds, lo / hi: their min and max) of one stitching
    plot, and the x order. `setting` is an objective label from `setting_label` (for a run without options,
    the objective's name). Balogh & Jelasity 2023 plots every run of its three: the min-max whiskers show their
    spread around the mean."""
    t = _panel(trials, front, end, setting)
    if t.empty:
        return pd.DataFrame(columns=["x", "metric", "value", "lo", "hi", "n_seeds"]), [END_LABEL, FRONT_LABEL]
    order = t[["front_point", "point_index"]].drop_duplicates().sort_values("point_index")["front_point"].tolist()
    agg = t.groupby("front_point").agg(
        accuracy=("clean_acc", "mean"),
        accuracy_lo=("clean_acc", "min"),
        accuracy_hi=("clean_acc", "max"),
        robust=("robust_acc", "mean"),
        robust_lo=("robust_acc", "min"),
        robust_hi=("robust_acc", "max"),
        n_seeds=("seed", "nunique"),
        end_clean=("end_clean_acc", "first"),
        end_robust=("end_robust_acc", "first"),
        front_clean=("front_clean_acc", "first"),
        front_robust=("front_robust_acc", "first"),
    )
    rows = []
    for point, r in agg.iterrows():
        for metric, col in (("accuracy", "accuracy"), ("robust accuracy", "robust")):
            if metric == "accuracy" or pd.notna(r[col]):  # accuracy always (a NaN draws nothing)
                spread = {"lo": r[f"{col}_lo"], "hi": r[f"{col}_hi"]}
                rows.append({"x": point, "metric": metric, "value": r[col], **spread, "n_seeds": r["n_seeds"]})
    first = agg.iloc[0]
    for label, clean, robust in (
        (END_LABEL, first["end_clean"], first["end_robust"]),
        (FRONT_LABEL, first["front_clean"], first["front_robust"]),
    ):
        if pd.notna(clean):
            rows.append({"x": label, "metric": "accuracy", "value": clean, "n_seeds": 1})
        if pd.notna(robust):
            rows.append({"x": label, "metric": "robust accuracy", "value": robust, "n_seeds": 1})
    return pd.DataFrame(rows), [END_LABEL, *order, FRONT_LABEL]


def _pair_title(t: pd.DataFrame, front: str, end: str) -> str:
    if t.empty or "front_dataset" not in t or t["front_dataset"].isna().all():
        return f"{front} -> {end}"
    r = t.iloc[0]
    if r["front_dataset"] == r["end_dataset"]:
        return f"{front} -> {end}"
    return f"{front} ({r['front_dataset']}) -> {end} ({r['end_dataset']})"


def stitching_plot(
    trials: pd.DataFrame, front: str, end: str, setting: str, width: int = 300, height: int = 200
) -> alt.LayerChart:
    """One stitching plot: stitched accuracies over stitch points with the donors' accuracy bands (robust
    accuracy in the legend only where some was measured)."""
    points, order = stitching_data(trials, front, end, setting)
    metrics = [m for m in METRIC_COLORS if m == "accuracy" or m in set(points["metric"])]
    color = alt.Color(
        "metric:N", title="metric", scale=alt.Scale(domain=metrics, range=[METRIC_COLORS[m] for m in metrics])
    )
    donors = points[points["x"].isin([END_LABEL, FRONT_LABEL])]
    bands = (
        donors.groupby("metric")["value"].agg(lo="min", hi="max").reset_index()
        if len(donors)
        else pd.DataFrame(columns=["metric", "lo", "hi"])
    )
    band = alt.Chart(bands).mark_rect(opacity=0.18).encode(y=alt.Y("lo:Q"), y2="hi:Q", color=color)
    lines = (
        alt.Chart(points)
        .mark_line(point=True)
        .encode(
            x=alt.X("x:N", sort=order, title="stitch point", axis=alt.Axis(labelAngle=-40)),
            y=alt.Y("value:Q", title="accuracy (mean; whiskers: min-max over seeds)", scale=alt.Scale(domain=[0, 1])),
            color=color,
            tooltip=["x:N", "metric:N", alt.Tooltip("value:Q", format=".3f"), "n_seeds:Q"],
        )
    )
    spread = points[points["n_seeds"] > 1] if "lo" in points else points.iloc[0:0]
    whiskers = alt.Chart(spread).mark_rule().encode(x=alt.X("x:N", sort=order), y="lo:Q", y2="hi:Q", color=color)
    title = wrap_title(f"{_pair_title(_panel(trials, front, end, setting), front, end)} ({setting})", PANEL_WIDTH)
    return alt.layer(band, whiskers, lines).properties(width=width, height=height, title=title)


def _pairs_and_settings(trials: pd.DataFrame) -> tuple[pd.DataFrame, list, list[str]]:
    """The done same-layer trials (with their setting), their (front, end) pairs and settings: a pair stitched
    cross-layer only has no stitching or class-collapse plot."""
    done = _with_setting(same_layer(trials))
    pairs = list(done[["front", "end"]].drop_duplicates().sort_values(["front", "end"]).itertuples(index=False))
    return done, pairs, sorted(done["setting"].unique())


def stitching_grid(trials: pd.DataFrame) -> alt.VConcatChart:
    """Stitching plots of every (front, end) pair (rows) and setting (columns); a pair shows only the
    settings it was run with."""
    done, pairs, _ = _pairs_and_settings(trials)
    rows = []
    for p in pairs:
        mine = done[(done["front"] == p.front) & (done["end"] == p.end)]
        rows.append(alt.hconcat(*[stitching_plot(done, p.front, p.end, s) for s in sorted(mine["setting"].unique())]))
    return alt.vconcat(*rows).resolve_scale(color="shared")


def is_cross_task(trials: pd.DataFrame) -> pd.Series:
    """Rows whose front and end donors were trained on different datasets."""
    if "front_dataset" not in trials or "end_dataset" not in trials:
        return pd.Series(False, index=trials.index)
    return trials["front_dataset"].notna() & (trials["front_dataset"] != trials["end_dataset"])


def cross_task_grid(trials: pd.DataFrame) -> alt.VConcatChart:
    """Fig. 8: stitching plots of the cross-task pairs, one column per setting (incl. the stitcher's data)."""
    return stitching_grid(trials[is_cross_task(trials)])


def collapse_trials(trials: pd.DataFrame) -> pd.DataFrame:
    """The trials the class-collapse plots draw: done, same-layer, with a most-frequent-class ratio."""
    t = same_layer(trials)
    return t[t["most_frequent_class_ratio"].notna()] if "most_frequent_class_ratio" in t else t.iloc[0:0]


def class_collapse_data(trials: pd.DataFrame, front: str, end: str) -> tuple[pd.DataFrame, list[str], float | None]:
    """Per setting and stitch point, the most-frequent-class ratio's mean over seeds and its min and max (`lo`,
    `hi`: the paper plots every run); the x order; 1/num_classes."""
    done = _with_setting(collapse_trials(trials))
    t = done[(done["front"] == front) & (done["end"] == end)]
    if t.empty:
        return pd.DataFrame(columns=["x", "setting", "ratio", "lo", "hi"]), [], None
    order = t[["front_point", "point_index"]].drop_duplicates().sort_values("point_index")["front_point"].tolist()
    agg = (
        t.groupby(["setting", "front_point"])["most_frequent_class_ratio"]
        .agg(ratio="mean", lo="min", hi="max")
        .reset_index()
        .rename(columns={"front_point": "x"})
    )
    classes = t["num_classes"].dropna() if "num_classes" in t else pd.Series(dtype=float)
    return agg, order, (1.0 / classes.iloc[0]) if len(classes) else None


def class_collapse_plot(
    trials: pd.DataFrame, front: str, end: str, width: int = 300, height: int = 200
) -> alt.LayerChart:
    """Fig. 4/6: the most-frequent-class ratio of the stitched networks per stitch point, one line per
    setting, and the 1/num_classes line (black) that an unbiased classifier on balanced data sits on."""
    data, order, chance = class_collapse_data(trials, front, end)
    lines = (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=alt.X("x:N", sort=order, title="stitch point", axis=alt.Axis(labelAngle=-40)),
            y=alt.Y(
                "ratio:Q",
                title="most frequent class ratio (whiskers: min-max over seeds)",
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color("setting:N", title="setting"),
            tooltip=["x:N", "setting:N", alt.Tooltip("ratio:Q", format=".3f")],
        )
    )
    whiskers = (
        alt.Chart(data)
        .mark_rule()
        .encode(x=alt.X("x:N", sort=order), y="lo:Q", y2="hi:Q", color=alt.Color("setting:N", title="setting"))
    )
    layers = [whiskers, lines]
    if chance is not None:
        layers.append(alt.Chart(pd.DataFrame({"chance": [chance]})).mark_rule(color="black").encode(y="chance:Q"))
    return alt.layer(*layers).properties(width=width, height=height, title=f"{front} -> {end}")


def class_collapse_grid(trials: pd.DataFrame, per_row: int = 3) -> alt.VConcatChart:
    """One class-collapse plot per donor pair with same-layer trials that measured the ratio, `per_row` to a row."""
    _, pairs, _ = _pairs_and_settings(collapse_trials(trials))
    plots = [class_collapse_plot(trials, p.front, p.end) for p in pairs]
    rows = [alt.hconcat(*plots[i : i + per_row]) for i in range(0, len(plots), per_row)]
    return alt.vconcat(*rows)


def layer_heatmap(long: pd.DataFrame, front: str, end: str, measure: str, size: int = 180) -> alt.Chart:
    """Balogh & Jelasity 2025 Fig. 1-2: one measure over (front layer, end layer), front layers as rows in
    input-to-output
    order. `long` is `analysis.matrices.long_matrices(trials)`."""
    d = long[(long["front"] == front) & (long["end"] == end) & (long["measure"] == measure)]
    rows = d.sort_values("point_index")["front_point"].drop_duplicates().tolist()
    cols = d.sort_values("end_index")["end_point"].drop_duplicates().tolist()
    return (
        alt.Chart(d)
        .mark_rect()
        .encode(
            x=alt.X("end_point:N", sort=cols, title=f"{end} layer", axis=alt.Axis(labelAngle=-40)),
            y=alt.Y("front_point:N", sort=rows, title=f"{front} layer"),
            color=alt.Color("value:Q", title=measure, scale=alt.Scale(scheme="viridis")),
            tooltip=["front_point:N", "end_point:N", alt.Tooltip("value:Q", format=".3f"), "seeds:Q", "null_p:Q"],
            # a value not above its permutation null is faded (no null measured: drawn as usual)
            opacity=alt.condition("datum.above_null === false", alt.value(0.3), alt.value(1.0)),
        )
        .properties(width=size, height=size, title=measure)
    )


def heatmap_grid(long: pd.DataFrame) -> alt.VConcatChart:
    """Every pair with a layer-by-layer matrix (more than one end layer per front layer): one row of
    heatmaps, one per measure, each with its own colour scale."""
    rows = []
    for pair in long[["front", "end"]].drop_duplicates().itertuples(index=False):
        mine = long[(long["front"] == pair.front) & (long["end"] == pair.end)]
        if mine.groupby(["measure", "front_point"])["end_point"].nunique().max() < 2:
            continue
        maps = [layer_heatmap(long, pair.front, pair.end, m) for m in mine["measure"].drop_duplicates()]
        rows.append(
            alt.hconcat(*maps).resolve_scale(color="independent").properties(title=f"{pair.front} -> {pair.end}")
        )
    return alt.vconcat(*rows)


def donor_curves_chart(curves: pd.DataFrame) -> alt.FacetChart:
    """Each trained donor's losses per epoch: training, validation and (adversarial methods) adversarial
    validation (Cianfarani et al. 2022 Fig. 6, where the adversarial validation loss rising while the training
    loss falls marks overfitting)."""
    losses = curves[curves["metric"].str.endswith("loss")]
    return (
        alt.Chart(losses)
        .mark_line(point=True)
        .encode(
            x=alt.X("epoch:Q", title="epoch", axis=epoch_axis(losses["epoch"])),
            y=alt.Y("value:Q", title="loss"),
            color=alt.Color("metric:N", title="loss"),
            tooltip=["donor:N", "metric:N", "epoch:Q", alt.Tooltip("value:Q", format=".3f")],
        )
        .properties(width=260, height=160)
        .facet(facet=alt.Facet("donor:N", title=None), columns=3)
    )
