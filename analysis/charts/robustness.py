"""Similarity against robustness (Jones et al. 2022): CKA at the penultimate layer on natural and on inverted
data by robustness level (Figs 1, 3, 4) and across levels (Fig. 6), saliency similarity (Fig. 5), agreement
after stitching (Figs 7-8), and the inverted images themselves (Jones et al. Fig. 2; Balogh & Jelasity 2023
Figs 9, 27). A donor's robustness level is its training budget (`train_eps`; 0 for plain training), read
from the donors table; pairs are of two different donors.
"""

from __future__ import annotations

import base64
import struct
import zlib

import altair as alt
import numpy as np
import pandas as pd

from analysis.intervals import banded_lines
from analysis.matrices import agreement_table
from sweep.store import inverted as stored
from sweep.store.storage import open_root


def levels(donors: pd.DataFrame) -> pd.DataFrame:
    """ref -> arch, eps (the training budget; 0 for plain training). Donors of unknown budget (RobustBench or
    `file:` checkpoints record none) are left out rather than counted as plain."""
    if donors.empty:
        return pd.DataFrame(columns=["arch", "eps"])
    d = donors.drop_duplicates("ref").set_index("ref")
    eps = d["train_eps"].astype(float).where(d["train_eps"].notna(), (d["training"] == "plain").map({True: 0.0}))
    return pd.DataFrame({"arch": d["arch"], "eps": eps}).dropna(subset=["eps"])


def _with_levels(rows: pd.DataFrame, donors: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    lv = levels(donors)
    rows = rows[rows[a].isin(lv.index) & rows[b].isin(lv.index)]
    return rows.assign(
        a_eps=rows[a].map(lv["eps"]).values,
        b_eps=rows[b].map(lv["eps"]).values,
        a_arch=rows[a].map(lv["arch"]).values,
        b_arch=rows[b].map(lv["arch"]).values,
        across=(rows[a].map(lv["arch"]) != rows[b].map(lv["arch"])).values,
    )


def _population(rows: pd.DataFrame, donors: pd.DataFrame, per_cell: bool = False) -> pd.DataFrame:
    """One stated population of architectures, so that every level (or cell) of a figure averages the same
    architectures (Jones et al.: Fig. 1 "averaged across every pair of architectures", Figs 5, 7-8 "every pair of
    models" within each level). A curve over levels (Figs 1, 3-5, 7-8): the architectures with donors at every
    level the rows hold. A cell of two levels (Fig. 6, `per_cell`): the architectures with donors at both. All
    pairs of two different donors of those architectures are kept (`_counted` says how many architectures the
    kept pairs hold)."""
    if rows.empty:
        return rows
    lv = levels(donors)
    present = lv.groupby("eps")["arch"].agg(lambda a: frozenset(a))
    if per_cell:
        common = [
            present.get(x, frozenset()) & present.get(y, frozenset()) for x, y in zip(rows["a_eps"], rows["b_eps"])
        ]
    else:
        shown = sorted(set(rows["a_eps"]) | set(rows["b_eps"]))
        one = frozenset.intersection(*(present.get(e, frozenset()) for e in shown))
        common = [one] * len(rows)
    keep = [x in c and y in c for x, y, c in zip(rows["a_arch"], rows["b_arch"], common)]
    return rows[keep]


def _counted(rows: pd.DataFrame, keys: list[str], value: str, **more) -> pd.DataFrame:
    """Per group of `keys`: the mean of `value` (and `more` aggregations), `pairs` (the pairs averaged) and `archs`
    (the architectures those pairs hold: what was measured, not which donors exist, Jones et al. 2022 Fig. 1)."""
    g = rows.groupby(keys)
    out = g.agg(**{value: (value, "mean")}, **more, pairs=(value, "size"))
    sides = [rows[[*keys, side]].rename(columns={side: "arch"}) for side in ("a_arch", "b_arch")]
    archs = pd.concat(sides).groupby(keys)["arch"].nunique()
    return out.assign(archs=archs.astype(int)).reset_index()


def _cka_units(similarity: pd.DataFrame, donors: pd.DataFrame) -> pd.DataFrame:
    """Done CKA rows at the penultimate layer of both sides, between different donors, with levels and the
    images seen: 'natural' (both benign) or 'inverted' (both A's inverted images)."""
    if similarity.empty or "measure" not in similarity:
        return pd.DataFrame()
    s = similarity[(similarity["status"] == "done") & (similarity["measure"].fillna("cka") == "cka")]
    s = s[(s["a_point"] == "penultimate") & (s["b_point"] == "penultimate") & (s["a"] != s["b"])]
    inputs = np.where(
        (s["a_inputs"] == "inverted") & (s["b_inputs"] == "inverted"),
        "inverted",
        np.where((s["a_inputs"] == "benign") & (s["b_inputs"] == "benign"), "natural", ""),
    )
    s = s.assign(data=inputs)
    return _with_levels(s[s["data"] != ""], donors, "a", "b")


def cka_by_level(similarity: pd.DataFrame, donors: pd.DataFrame) -> pd.DataFrame:
    """Mean, std and count of penultimate CKA over pairs of one robustness level, on natural and on inverted
    data (the row donor's inversions), across architectures and within one (Figs 1, 3, 4)."""
    s = _cka_units(similarity, donors)
    if s.empty:
        return s
    s = _population(s[s["a_eps"] == s["b_eps"]], donors).assign(eps=lambda d: d["a_eps"])
    return _counted(s, ["eps", "data", "across"], "cka", std=("cka", "std"))


def arch_matrices(similarity: pd.DataFrame, donors: pd.DataFrame) -> pd.DataFrame:
    """Figs 3-4's per-pair heatmaps: at each robustness level, the penultimate CKA between an architecture's
    donor (row: on natural images, or its own inversions) and another's (column), the mean over the pairs of
    different donors of those two architectures. Natural data is symmetric, so a pair measured one way fills
    both cells; inverted data is not (the row's inversions). `across`: a cell of two different architectures
    (the paper's numbers beside these figures are the mean of those cells of the drawn heatmap)."""
    s = _cka_units(similarity, donors)
    if s.empty:
        return s
    s = s[s["a_eps"] == s["b_eps"]]
    natural = s[s["data"] == "natural"]
    mirrored = natural.rename(columns={"a": "b", "b": "a", "a_arch": "b_arch", "b_arch": "a_arch"})
    # each unordered natural pair once per direction (a pair measured both ways is not counted twice)
    both = pd.concat(
        [natural, mirrored[~mirrored.set_index(["a", "b"]).index.isin(natural.set_index(["a", "b"]).index)]]
    )
    s = pd.concat([both, s[s["data"] == "inverted"]]).assign(eps=lambda d: d["a_eps"])
    g = s.groupby(["eps", "data", "a_arch", "b_arch"])
    cells = g.agg(cka=("cka", "mean"), pairs=("cka", "size")).reset_index()
    return cells.assign(across=cells["a_arch"] != cells["b_arch"])


def arch_matrix_chart(rows: pd.DataFrame) -> alt.FacetChart:
    """A heatmap per (level, data): rows the architecture whose donor (or inversions) is side A, columns side B,
    each cell labelled with its mean CKA."""
    base = alt.Chart().encode(
        x=alt.X("b_arch:N", title="compared model"), y=alt.Y("a_arch:N", title="model (inverted: whose inversions)")
    )
    cells = base.mark_rect().encode(
        color=alt.Color("cka:Q", title="CKA", scale=alt.Scale(domain=[0, 1], scheme="viridis")),
        tooltip=["a_arch:N", "b_arch:N", alt.Tooltip("cka:Q", format=".3f"), "pairs:Q"],
    )
    text = base.mark_text(fontSize=9, color="white").encode(text=alt.Text("cka:Q", format=".2f"))
    n = max(rows["a_arch"].nunique(), rows["b_arch"].nunique())
    return (
        alt.layer(cells, text, data=rows)
        .properties(width=40 * n + 40, height=30 * n + 30)
        .facet(row=alt.Row("eps:O", title="robustness level"), column=alt.Column("data:N", title=None))
    )


def cka_across_levels(similarity: pd.DataFrame, donors: pd.DataFrame) -> pd.DataFrame:
    """Mean penultimate CKA on inverted data by (row level: whose inversions, column level) (Fig. 6)."""
    s = _cka_units(similarity, donors)
    if s.empty:
        return s
    s = _population(s[s["data"] == "inverted"], donors, per_cell=True)
    return _counted(s, ["a_eps", "b_eps"], "cka")


def across_levels_by_arch(similarity: pd.DataFrame, donors: pd.DataFrame) -> pd.DataFrame:
    """Fig. 6 in the paper's grid: penultimate CKA on the row donor's inversions, per (row architecture, column
    architecture) and (row level, column level), the mean over the pairs of different donors."""
    s = _cka_units(similarity, donors)
    if s.empty:
        return s
    g = s[s["data"] == "inverted"].groupby(["a_arch", "b_arch", "a_eps", "b_eps"])
    return g.agg(cka=("cka", "mean"), pairs=("cka", "size")).reset_index()


def across_levels_grid(rows: pd.DataFrame) -> alt.FacetChart:
    """Outer rows and columns the architectures, inside each block the levels (row: whose inversions)."""
    base = alt.Chart().encode(x=alt.X("b_eps:O", title="eps"), y=alt.Y("a_eps:O", title="eps (inversions)"))
    cells = base.mark_rect().encode(
        color=alt.Color("cka:Q", title="CKA", scale=alt.Scale(domain=[0, 1], scheme="viridis")),
        tooltip=["a_arch:N", "b_arch:N", "a_eps:O", "b_eps:O", alt.Tooltip("cka:Q", format=".3f"), "pairs:Q"],
    )
    n = max(rows["a_eps"].nunique(), rows["b_eps"].nunique())
    return (
        alt.layer(cells, data=rows)
        .properties(width=22 * n + 20, height=18 * n + 20)
        .facet(row=alt.Row("a_arch:N", title="model (its inversions)"), column=alt.Column("b_arch:N", title=None))
    )


def saliency_by_level(similarity: pd.DataFrame, donors: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over pairs of one robustness level of the mean saliency cosine (Fig. 5)."""
    if similarity.empty or "measure" not in similarity:
        return pd.DataFrame()
    s = similarity[(similarity["status"] == "done") & (similarity["measure"] == "saliency")]
    s = s[(s["a_inputs"] == "benign") & (s["b_inputs"] == "benign")]  # Fig. 5: natural images
    s = _with_levels(s[s["a"] != s["b"]], donors, "a", "b")
    s = _population(s[s["a_eps"] == s["b_eps"]], donors).assign(eps=lambda d: d["a_eps"])
    if s.empty:
        return s
    out = _counted(s, ["eps"], "saliency_cosine", std=("saliency_cosine", "std"))
    return out.rename(columns={"saliency_cosine": "cosine"})


def agreement_by_level(trials: pd.DataFrame, donors: pd.DataFrame) -> pd.DataFrame:
    """Agreement with the head after stitching, by robustness level of the (body, head) pair of one level:
    mean and standard error over pairs of different donors (Figs 7-8)."""
    if trials.empty or "head_agreement" not in trials:
        return pd.DataFrame()
    t = _with_levels(trials[trials["status"] == "done"], donors, "front", "end")
    t = _population(t[t["a_eps"] == t["b_eps"]], donors).assign(eps=lambda d: d["a_eps"])
    if t.empty:
        return pd.DataFrame()
    table = agreement_table(t, by=("eps", "objective", "front_point", "end_point"))
    return table.sort_values("eps", kind="stable") if len(table) else table


AGREEMENT_LABELS = {
    "agree_both_correct": "body and head agree, correct (Fig. 7)",
    "agree_both_wrong": "body and head agree, wrong (Fig. 7)",
    "agree_disagree": "body and head disagree (Fig. 8)",
}


def agreement_curves(trials: pd.DataFrame, donors: pd.DataFrame) -> pd.DataFrame:
    """Figs 7-8 as the paper draws them: per robustness level, each agreement's mean over pairs of different
    donors and its band of +- 1 standard error (`lo`, `hi`; no band for a single pair), one row per
    (level, setting, measure)."""
    table = agreement_by_level(trials, donors)
    if table.empty:
        return table
    keys = ["eps", "objective", "front_point", "end_point", "pairs"]
    rows = []
    for measure, label in AGREEMENT_LABELS.items():
        if measure in table:
            part = table[keys].assign(measure=measure, label=label, agreement=table[measure])
            se = table[f"{measure}_se"].fillna(0.0)
            rows.append(part.assign(lo=part["agreement"] - se, hi=part["agreement"] + se))
    return pd.concat(rows, ignore_index=True)


def agreement_curve_chart(rows: pd.DataFrame) -> alt.FacetChart:
    """A line per agreement over the training eps, its 1-SE band shaded; a panel per stitch setting."""
    colour = alt.Color("label:N", title=None, sort=list(AGREEMENT_LABELS.values()), legend=alt.Legend(labelLimit=400))
    x = alt.X("eps:O", title="robustness level (training eps)")
    y = alt.Y("agreement:Q", title="agreement with the head (band: +- 1 SE over pairs)")
    tooltip = ["eps:O", "label:N", alt.Tooltip("agreement:Q", format=".3f"), "pairs:Q"]
    setting = rows["objective"] + " " + rows["front_point"] + " -> " + rows["end_point"]
    return banded_lines(rows.assign(setting=setting), x, y, colour, tooltip, "setting", columns=3)


def level_chart(rows: pd.DataFrame, y: str, err: str | None, colour: str | None, title: str) -> alt.Chart:
    """A measure against the robustness level (points and error bars of +- `err`)."""
    rows = rows.assign(lo=rows[y] - rows[err].fillna(0), hi=rows[y] + rows[err].fillna(0)) if err else rows
    enc = dict(x=alt.X("eps:O", title="robustness level (training eps)"))
    if colour:
        enc["color"] = alt.Color(f"{colour}:N")
    base = alt.Chart(rows).encode(**enc)
    line = base.mark_line(point=True).encode(y=alt.Y(f"{y}:Q", title=title)).properties(width=240, height=200)
    return line + base.mark_errorbar().encode(y=alt.Y("lo:Q", title=title), y2="hi:Q") if err else line


def cka_level_chart(rows: pd.DataFrame) -> alt.LayerChart:
    rows = rows.assign(pairs_of=rows["data"] + np.where(rows["across"], ", across architectures", ", within one"))
    return level_chart(rows, "cka", "std", "pairs_of", "CKA (penultimate)")


def across_levels_chart(rows: pd.DataFrame) -> alt.LayerChart:
    """Fig. 6's matrix, each cell labelled with its mean CKA and its pair count."""
    rows = rows.assign(label=[f"{c:.2f} ({n})" for c, n in zip(rows["cka"], rows["pairs"])])
    base = alt.Chart(rows).encode(
        x=alt.X("b_eps:O", title="column donor's eps"), y=alt.Y("a_eps:O", title="row donor's eps (its inversions)")
    )
    cells = base.mark_rect().encode(
        color=alt.Color("cka:Q", title="CKA", scale=alt.Scale(domain=[0, 1], scheme="viridis")),
        tooltip=["a_eps:O", "b_eps:O", alt.Tooltip("cka:Q", format=".3f"), "pairs:Q", "archs:Q"],
    )
    text = base.mark_text(fontSize=9, color="white").encode(text="label:N")
    return (cells + text).properties(width=40 * rows["b_eps"].nunique() + 80, height=30 * rows["a_eps"].nunique() + 60)


def inversion_images(results, inversions: pd.DataFrame, per_unit: int = 8) -> pd.DataFrame:
    """The first `per_unit` images (at most `inverted.PREVIEW`) of each done inversion unit, as Jones et al.
    Fig. 2 shows them: the targets as the first row, then per unit its seed images (the inversion's starting
    points; a row only where they differ from the row of seeds above) and its inverted images. Columns row (a
    label), column, url (a PNG data URL), read from each unit's index (`sweep.store.inverted`), which keeps
    those images in 8 bits: neither the dataset nor the shards are read."""
    if inversions.empty:
        return pd.DataFrame()
    done = inversions[inversions["status"] == "done"].drop_duplicates("unit_id").sort_values(["donor", "point"])
    out: list[dict] = []
    last_seeds = None
    root = open_root(results)
    for r in done.itertuples(index=False):
        try:
            kept = stored.index(root, r.unit_id)
        except FileNotFoundError:
            continue
        rows = [] if out else [("targets", kept["preview_targets"][:per_unit])]
        seeds = kept["preview_seeds"][:per_unit] if "preview_seeds" in kept else None
        if seeds is not None and (last_seeds is None or not np.array_equal(seeds, last_seeds)):
            rows.append((f"seeds ({r.recipe}, seed {r.seed})", seeds))
            last_seeds = seeds
        rows.append((f"{r.donor} @{r.point} ({r.recipe})", kept["preview_inverted"][:per_unit]))
        out += [dict(row=label, column=k, url=png_url(im)) for label, images in rows for k, im in enumerate(images)]
    return pd.DataFrame(out)


def png_url(image: np.ndarray) -> str:
    """A C x H x W image in [0, 1] (1 or 3 channels) as a PNG data URL (8-bit RGB, written with zlib alone)."""
    v = np.clip(np.rint(image * 255), 0, 255).astype(np.uint8)
    rgb = np.repeat(v, 3, axis=0) if v.shape[0] == 1 else v[:3]
    h, w = rgb.shape[1:]
    raw = b"".join(b"\x00" + row.tobytes() for row in rgb.transpose(1, 2, 0))  # filter 0 per scanline

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(png).decode()


def inversion_grid(images: pd.DataFrame, size: int = 64) -> alt.Chart:
    """The images as a grid: one row per inversion unit (the targets first), one column per image."""
    order = images["row"].drop_duplicates().tolist()
    return (
        alt.Chart(images)
        .mark_image(width=size, height=size)
        .encode(
            x=alt.X("column:O", title=None, axis=alt.Axis(labels=False, ticks=False)),
            y=alt.Y("row:N", sort=order, title=None),
            url="url:N",
        )
        .properties(width=(size + 4) * images["column"].nunique(), height=(size + 4) * len(order))
    )
