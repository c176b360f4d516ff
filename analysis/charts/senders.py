"""Stitching by sender and receiver (Smith & Marcu 2024): accuracy per stitch point with a min-max band over
runs and the receiver's own accuracy as the baseline (Figs 1b, C5a, C6a), the receiver's rank per point with
+-1 std (Figs 1c, C5b, C6b), the sender x receiver accuracy at the first point (Table C1) and each model's
accuracy on its own test set (Table C1's base accuracy, Table C2).

A model *type* is the data a donor was trained on (`front_dataset` / `end_dataset`: its initialisations are the
donors of one type), or `noise` for a clustered-noise sender; runs are every trial of one (sender type,
receiver type, point, architecture): initialisations and stitcher seeds together. These sections are drawn
for trials that measured the receiver rank (the `receiver_rank` index), as Smith & Marcu's do.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from analysis.donors import at_chance

WHOLE = "whole"  # the x position of the uncut receiver on its own test set (Fig. C6a's 'Whole')


def _typed(trials: pd.DataFrame) -> pd.DataFrame:
    """Done trials that measured the receiver rank, with `sender` and `receiver` model types."""
    if trials.empty or "rank_receiver" not in trials or trials["rank_receiver"].isna().all():
        return trials.iloc[0:0]
    d = trials[(trials["status"] == "done") & trials["rank_receiver"].notna()]
    if "noise_seed" in d:  # noise with its own seed: C.2's investigation, tabulated apart (`noise_initialisations`)
        d = d[d["noise_seed"].isna()]
    noise = d["noise_sigma"].notna() if "noise_sigma" in d else pd.Series(False, index=d.index)
    # the baseline: the receiver on the trial's own test images (older rows: its donors-table accuracy) ...
    baseline = d["receiver_acc"] if "receiver_acc" in d else pd.Series(float("nan"), index=d.index)
    baseline = baseline.fillna(d["end_clean_acc"])
    # ... except in Section 4.2's rows, the stitch trained and tested on the sender's data (`data: front`:
    # Colour-only images into a greyscale-MNIST receiver), where the receiver is at chance on those images: the
    # paper compares with the receiver on its own test set (0.990), `end_clean_acc`. Only there: Table C1 reads
    # every receiver on the Correlated images, at chance or not.
    own_data = d["stitch_data"].eq("front") if "stitch_data" in d else pd.Series(False, index=d.index)
    foreign = (
        ~noise
        & own_data
        & pd.Series(
            [
                pd.notna(a) and pd.notna(c) and pd.notna(n) and at_chance(float(a), int(c), int(n))
                for a, c, n in zip(baseline, d["num_classes"], d["test_size"])
            ],
            index=d.index,
            dtype=bool,
        )
    )
    return d.assign(
        sender=d["front_dataset"].where(~noise, "noise"),
        receiver=d["end_dataset"],
        baseline=baseline.where(~foreign, d["end_clean_acc"]),
        stitched_on=d["dataset"],
    )


def _arch(d: pd.DataFrame, donors: pd.DataFrame) -> pd.Series:
    archs = donors.drop_duplicates("ref").set_index("ref")["arch"] if not donors.empty else pd.Series(dtype=str)
    return d["end"].map(archs).fillna("")


def by_point(trials: pd.DataFrame, donors: pd.DataFrame) -> pd.DataFrame:
    """Per (architecture, receiver, sender, point): the stitched accuracy's mean, min and max over runs and
    the run count, and the receiver's baseline (its mean accuracy on the stitching test data); plus, at
    `WHOLE`, each receiver type's mean accuracy on its own test set (the donors' own evaluations)."""
    d = _typed(trials)
    if d.empty:
        return pd.DataFrame()
    d = d.assign(arch=_arch(d, donors))
    keys = ["arch", "receiver", "sender", "front_point", "point_index"]
    out = d.groupby(keys, as_index=False).agg(
        acc=("clean_acc", "mean"),
        acc_min=("clean_acc", "min"),
        acc_max=("clean_acc", "max"),
        runs=("trial_id", "nunique"),
        baseline=("baseline", "mean"),
    )
    own = own_accuracy(donors)
    if not own.empty:
        whole = out.drop_duplicates(["arch", "receiver", "sender"])[["arch", "receiver", "sender", "baseline"]]
        whole = whole.merge(own.rename(columns={"model": "receiver"}), on=["arch", "receiver"])
        whole = whole.assign(
            front_point=WHOLE, point_index=0, acc_min=whole["acc"], acc_max=whole["acc"], runs=whole["initialisations"]
        )
        out = pd.concat([whole[out.columns], out], ignore_index=True)
    return out.sort_values(keys).reset_index(drop=True)


def _per_point(rows: pd.DataFrame, y: str, lo: str, hi: str, title: str, fmt: str) -> list[alt.Chart]:
    """A band (lo..hi) and a line (y) per sender over the stitch points, input to output."""
    order = rows.sort_values("point_index")["front_point"].drop_duplicates().tolist()
    x = alt.X("front_point:N", sort=order, title="stitch point", axis=alt.Axis(labelAngle=-30))
    colour = alt.Color("sender:N", title="sender", legend=alt.Legend(orient="bottom", columns=2, labelLimit=400))
    band = alt.Chart().mark_area(opacity=0.2).encode(x=x, y=f"{lo}:Q", y2=f"{hi}:Q", color=colour)
    line = (
        alt.Chart()
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y(f"{y}:Q", title=title, scale=alt.Scale(zero=False)),
            color=colour,
            tooltip=["sender:N", "front_point:N", alt.Tooltip(f"{y}:Q", format=fmt), "runs:Q"],
        )
    )
    return [band, line]


def _panels(layers: list[alt.Chart], rows: pd.DataFrame) -> alt.FacetChart:
    """One panel per receiver (rows) and architecture (columns)."""
    return (
        alt.layer(*layers, data=rows)
        .properties(width=360, height=240)
        .facet(row=alt.Row("receiver:N", title="receiver"), column=alt.Column("arch:N", title=None))
    )


def accuracy_chart(rows: pd.DataFrame) -> alt.FacetChart:
    """Accuracy per point, one line per sender with its min-max band over runs, and the receiver's baseline
    as a dashed rule; one panel per receiver and architecture."""
    layers = _per_point(rows, "acc", "acc_min", "acc_max", "stitched accuracy (band: min-max over runs)", ".3f")
    base = (
        alt.Chart()
        .mark_rule(strokeDash=[4, 3], color="gray")
        .encode(
            y="mean(baseline):Q", tooltip=[alt.Tooltip("mean(baseline):Q", title="receiver baseline", format=".3f")]
        )
    )
    return _panels([*layers, base], rows)


def ranks(trials: pd.DataFrame, donors: pd.DataFrame) -> pd.DataFrame:
    """Per (architecture, receiver, sender, point): the receiver's first-layer rank after the stitch, mean and
    std over runs; and, as sender 'baseline', the rank the receiver's own front gives it on its images."""
    d = _typed(trials)
    if d.empty:
        return pd.DataFrame()
    d = d.assign(arch=_arch(d, donors))
    keys = ["arch", "receiver", "front_point", "point_index"]
    stitched = d.groupby([*keys, "sender"], as_index=False).agg(
        rank=("rank_receiver", "mean"), rank_std=("rank_receiver", "std"), runs=("trial_id", "nunique")
    )
    own = d.groupby(keys, as_index=False).agg(
        rank=("rank_receiver_end", "mean"), rank_std=("rank_receiver_end", "std"), runs=("trial_id", "nunique")
    )
    out = pd.concat([stitched, own.assign(sender="baseline")], ignore_index=True)
    out["rank_std"] = out["rank_std"].fillna(0.0)
    return out.assign(lo=out["rank"] - out["rank_std"], hi=out["rank"] + out["rank_std"])


def rank_chart(rows: pd.DataFrame) -> alt.FacetChart:
    """Receiver rank per point, one line per sender (and the receiver's own 'baseline'), +-1 std bands; one
    panel per receiver and architecture."""
    return _panels(_per_point(rows, "rank", "lo", "hi", "receiver rank after the stitch (band: +-1 std)", ".1f"), rows)


def first_point_table(trials: pd.DataFrame, donors: pd.DataFrame, noise: bool = False) -> pd.DataFrame:
    """Table C1, generalised: stitched accuracy at each architecture's first point, mean over runs, senders as
    rows and receivers as columns (a row is that type as sender, a column as receiver), one block per stitching
    dataset (`stitched_on`: Table C1's Correlated data; Section 4.2's sender data is its own block), with each
    type's base accuracy on that data (its networks as receivers, mean over their trials) and, per receiver, a
    `compatible R` flag: the stitched accuracy at or above receiver R's baseline on those images (Section 2:
    "it is considered that models A and B are compatible at layer l"). Network senders only; `noise=True`: the
    noise senders' rows instead (Section 4.2 / C5), never mixed into Table C1."""
    d = _typed(trials)
    if d.empty:
        return pd.DataFrame()
    d = d.assign(arch=_arch(d, donors))
    d = d[(d["sender"] == "noise") == noise]
    if d.empty:
        return pd.DataFrame()
    first = d[d["point_index"] == d.groupby("arch")["point_index"].transform("min")]
    keys = ["arch", "stitched_on", "sender"]
    table = first.pivot_table(index=keys, columns="receiver", values="clean_acc", aggfunc="mean")
    receivers = list(table.columns)
    table.columns = [f"receiver {c}" for c in table.columns]
    table = table.reset_index()
    if noise:  # the receiver's own baseline beside the noise: its accuracy on the images of its task
        base = first.groupby(["arch", "stitched_on"], as_index=False).agg(base_acc=("baseline", "mean"))
        table = table.merge(base, on=["arch", "stitched_on"], how="left")
        return _compatible(table, first, receivers)
    # a type's base accuracy: its networks, as receivers, on the stitching test images (mean over trials)
    base = d.groupby(["arch", "stitched_on", "receiver"], as_index=False).agg(base_acc=("baseline", "mean"))
    table = table.merge(base.rename(columns={"receiver": "sender"}), on=keys, how="left")
    return _compatible(table, d, receivers)


def _compatible(table: pd.DataFrame, d: pd.DataFrame, receivers: list) -> pd.DataFrame:
    """`compatible R` for each receiver R: the cell at or above R's baseline on the same images (its mean over
    R's trials in the block); empty where either is missing."""
    base = d.groupby(["arch", "stitched_on", "receiver"])["baseline"].mean()
    for r in receivers:
        at = pd.MultiIndex.from_arrays([table["arch"], table["stitched_on"], [r] * len(table)])
        floor = base.reindex(at).to_numpy()
        cell = table[f"receiver {r}"].to_numpy()
        flags = [None if pd.isna(c) or pd.isna(f) else bool(c >= f) for c, f in zip(cell, floor)]
        table[f"compatible {r}"] = pd.array(flags, dtype="boolean")
    return table


def own_accuracy_table(trials: pd.DataFrame, donors: pd.DataFrame) -> pd.DataFrame:
    """`own_accuracy`, for sweeps whose trials measured the receiver rank (this section's sweeps)."""
    return own_accuracy(donors) if not _typed(trials).empty else pd.DataFrame()


def own_accuracy(donors: pd.DataFrame) -> pd.DataFrame:
    """Table C2: each model type's mean accuracy on its own test set over its initialisations."""
    if donors.empty:
        return pd.DataFrame()
    d = donors[(donors["status"] == "done") & (donors["eval_dataset"] == donors["dataset"])]
    for own in ("num_classes", "train_clean_acc"):  # what only the donor's own evaluation records
        if own in d and d[own].notna().any():
            d = d[d[own].notna()]
            break
    d = d.drop_duplicates("donor")
    return (
        d.groupby(["arch", "dataset"], as_index=False)
        .agg(acc=("clean_acc", "mean"), initialisations=("donor", "nunique"))
        .rename(columns={"dataset": "model"})
    )


def noise_initialisations(trials: pd.DataFrame) -> pd.DataFrame:
    """Smith & Marcu C.2's investigation: the stitched accuracy of noise senders that have their own seed
    (`noise: {seed: N}`), per receiver and point, over the stitcher's initialisations on one noise dataset (the
    trials of the lowest noise seed, one per trial seed) and over noise datasets with one initialisation (the
    trials of the lowest trial seed, one per noise seed): runs, min, mean and max of each."""
    if trials.empty or "noise_seed" not in trials:
        return pd.DataFrame()
    d = trials[(trials["status"] == "done") & trials["noise_seed"].notna()]
    rows = []
    for (receiver, point), g in d.groupby(["end", "front_point"], sort=False):
        one_noise = g[g["noise_seed"] == g["noise_seed"].min()]
        one_init = g[g["seed"] == g["seed"].min()]
        for varied, sub in (("stitcher initialisation", one_noise), ("noise dataset", one_init)):
            acc = sub["clean_acc"]
            rows.append(
                dict(receiver=receiver, point=point, varied=varied, runs=len(sub), min_acc=acc.min(),
                     mean_acc=acc.mean(), max_acc=acc.max())
            )  # fmt: skip
    return pd.DataFrame(rows)
