"""Similarity units without stitching (Cianfarani et al. 2022): the layer x layer CKA heatmaps (Figs 2-3), the
diagonal curves of benign vs adversarial representations (Figs 4, 5b-d) and the transfer robustness matrix
(Fig. 5a), from the `similarity` table (`analysis.load_similarity`)."""

from __future__ import annotations

import altair as alt
import pandas as pd

from analysis.intervals import banded_lines, with_interval
from analysis.svcca_null import svcca_null


def unit_title(rows: pd.DataFrame) -> str:
    """'zoo:a (benign) ~ zoo:b (adversarial vs zoo:a)' for one unit's rows."""
    r = rows.iloc[0]
    attack = f" vs {r['attack_source']}" if isinstance(r.get("attack_source"), str) else ""
    a_in = r["a_inputs"] + (attack if r["a_inputs"] == "adversarial" else "")
    b_in = r["b_inputs"] + (attack if r["b_inputs"] == "adversarial" else "")
    name = f"{r['name']}: " if isinstance(r.get("name"), str) and r["name"] else ""
    return f"{name}{r['a']} ({a_in}) ~ {r['b']} ({b_in})"


def done(similarity: pd.DataFrame) -> pd.DataFrame:
    """The done CKA rows (not saliency units: they have no points)."""
    if not len(similarity):
        return similarity
    cka = similarity["measure"].fillna("cka") == "cka" if "measure" in similarity else True
    return similarity[(similarity["status"] == "done") & cka]


def matrices(similarity: pd.DataFrame) -> pd.DataFrame:
    """The done rows of units with more than one pair of points: units of a single pair (Jones et al.'s
    penultimate CKA) are drawn by the robustness-level charts instead."""
    d = done(similarity)
    return d[d.groupby("unit_id")["unit_id"].transform("size") > 1] if len(d) else d


def cka_heatmap(
    rows: pd.DataFrame, size: int = 200, domain: tuple[float, float] = (0, 1), title: str = "CKA"
) -> alt.Chart:
    """One unit's CKA matrix: A's points as rows and B's as columns, both input to output; colours over
    `domain` (the papers': 0 to 1)."""
    a_order = rows.sort_values("a_index")["a_point"].drop_duplicates().tolist()
    b_order = rows.sort_values("b_index")["b_point"].drop_duplicates().tolist()
    x_axis = alt.Axis(labels=len(b_order) <= 24, labelAngle=-40)  # too many module names to label
    y_axis = alt.Axis(labels=len(a_order) <= 24)
    return (
        alt.Chart(rows[["a_point", "b_point", "cka"]])
        .mark_rect()
        .encode(
            x=alt.X("b_point:N", sort=b_order, title=f"{rows['b'].iloc[0]} layer", axis=x_axis),
            y=alt.Y("a_point:N", sort=a_order, title=f"{rows['a'].iloc[0]} layer", axis=y_axis),
            color=alt.Color("cka:Q", title=title, scale=alt.Scale(domain=list(domain), scheme="viridis")),
            tooltip=["a_point:N", "b_point:N", alt.Tooltip("cka:Q", format=".3f")],
        )
        .properties(width=size, height=size, title=unit_title(rows))
    )


def cka_grid(similarity: pd.DataFrame, per_row: int = 3) -> alt.VConcatChart:
    """Every unit's heatmap, `per_row` to a row, one shared colour scale (CKA in [0, 1])."""
    maps = [cka_heatmap(rows) for _, rows in matrices(similarity).groupby("unit_id", sort=False)]
    return alt.vconcat(*[alt.hconcat(*maps[i : i + per_row]) for i in range(0, len(maps), per_row)])


LABELLED_CELLS = 10  # points per side up to which a cell (size / points pixels) holds its value as text


def cka_grid_to_data(similarity: pd.DataFrame, per_row: int = 3) -> alt.VConcatChart:
    """`cka_grid` for a study's own report: one colour scale from the lowest to the highest CKA of these
    matrices (said in the legend's title), so that 0.67 and 0.96 differ; each cell labelled with its value where
    it fits (at most `LABELLED_CELLS` points a side). A paper's page keeps `cka_grid`'s 0-1 scale."""
    rows = matrices(similarity)
    low, high = float(rows["cka"].min()), float(rows["cka"].max())
    domain = (low, high) if high > low else (low - 0.01, high + 0.01)  # one value: a scale that still draws
    title = f"CKA (scale: this data's {low:.2f}-{high:.2f})"
    maps = []
    for _, unit in rows.groupby("unit_id", sort=False):
        heat = cka_heatmap(unit, domain=domain, title=title)
        if max(unit["a_point"].nunique(), unit["b_point"].nunique()) <= LABELLED_CELLS:
            middle = (low + high) / 2  # dark text on viridis' bright end, light on its dark end
            text = heat.mark_text(fontSize=9).encode(
                text=alt.Text("cka:Q", format=".2f"),
                color=alt.condition(f"datum.cka > {middle}", alt.value("black"), alt.value("white")),
            )
            heat = alt.layer(heat, text)
        maps.append(heat)
    return alt.vconcat(*[alt.hconcat(*maps[i : i + per_row]) for i in range(0, len(maps), per_row)])


def within_networks(similarity: pd.DataFrame, donors: pd.DataFrame) -> pd.DataFrame:
    """The units of one network with itself on benign images (a = b), with the donor's architecture and its
    training setting ('plain', 'pgd eps=0.0314', ...: the training budget): the side-by-side layouts of Figs 2
    (robust vs plain) and 3 (across training eps and widths)."""
    d = done(similarity)
    if d.empty or donors.empty:
        return d.iloc[0:0]
    d = d[(d["a"] == d["b"]) & (d["a_inputs"] == "benign") & (d["b_inputs"] == "benign")]
    info = donors.drop_duplicates("ref").set_index("ref")
    d = d[d["a"].isin(info.index)]
    if d.empty:
        return d
    eps = d["a"].map(info["train_eps"]) if "train_eps" in info else pd.Series(float("nan"), index=d.index)
    training = d["a"].map(info["training"]).fillna("?")
    setting = training + eps.map(lambda e: "" if pd.isna(e) else f" eps={e:.4g}")
    return d.assign(arch=d["a"].map(info["arch"]), training=training, train_eps=eps.fillna(0.0), setting=setting)


def block_structure(similarity: pd.DataFrame, donors: pd.DataFrame, gap: int = 20) -> pd.DataFrame:
    """A number for the block structure of Cianfarani et al. 2022 Fig. 2 (bright squares off the diagonal: distant
    layers that represent alike): per network with itself on benign images, the mean CKA over the pairs of
    points more than `gap` apart in its point order, beside the mean over every off-diagonal pair. One row per
    unit: unit_id, network, setting, points, pairs (the pairs more than `gap` apart), far_cka, mean_cka."""
    within = within_networks(similarity, donors)
    rows = []
    for unit_id, g in within.groupby("unit_id", sort=False):
        off = g[g["a_index"] != g["b_index"]]
        far = off[(off["a_index"] - off["b_index"]).abs() > gap]
        rows.append(
            dict(
                unit_id=unit_id,
                network=g["a"].iloc[0],
                setting=g["setting"].iloc[0],
                points=g["a_index"].nunique(),
                pairs=len(far),
                far_cka=far["cka"].mean() if len(far) else float("nan"),
                mean_cka=off["cka"].mean() if len(off) else float("nan"),
            )
        )
    return pd.DataFrame(rows)


def budget_steps(similarity: pd.DataFrame, donors: pd.DataFrame) -> pd.DataFrame:
    """Cianfarani et al. 2022 Fig. 30 in numbers: two networks of one training method (threat model) at different
    budgets, on benign images: the mean CKA at the same point (`diagonal_cka`) and over every pair of points
    (`mean_cka`). One row per unit, by method and budget; a high diagonal between neighbouring budgets is a
    representation that changes gradually with the budget."""
    d = done(similarity)
    if d.empty or donors.empty or "train_eps" not in donors:
        return pd.DataFrame()
    d = d[(d["a"] != d["b"]) & (d["a_inputs"] == "benign") & (d["b_inputs"] == "benign")]
    info = donors.drop_duplicates("ref").set_index("ref")
    d = d[d["a"].isin(info.index) & d["b"].isin(info.index)]
    d = d.assign(training=d["a"].map(info["training"]), a_eps=d["a"].map(info["train_eps"]))
    d = d.assign(b_eps=d["b"].map(info["train_eps"]))
    d = d[(d["training"] == d["b"].map(info["training"])) & d["a_eps"].notna() & (d["a_eps"] != d["b_eps"])]
    rows = [
        dict(
            training=g["training"].iloc[0],
            a=a,
            b=b,
            a_eps=g["a_eps"].iloc[0],
            b_eps=g["b_eps"].iloc[0],
            points=g["a_point"].nunique(),
            diagonal_cka=g.loc[g["a_point"] == g["b_point"], "cka"].mean(),
            mean_cka=g["cka"].mean(),
        )  # fmt: skip
        for (_, a, b), g in d.groupby(["unit_id", "a", "b"], sort=False)
    ]
    out = pd.DataFrame(rows)
    return out.sort_values(["training", "a_eps", "b_eps"], ignore_index=True) if len(out) else out


LINF_FAMILY = ("plain", "pgd", "trades")  # one row of the within-network grid; other threat models a row each


def within_grid(rows: pd.DataFrame) -> alt.VConcatChart:
    """One row of heatmaps per architecture (Fig. 3's widths) and threat model, its networks side by side,
    plain first, then by training method and eps (Fig. 2's robust vs plain, Fig. 3's budgets); the plain,
    PGD and TRADES networks share their architecture's row, and each other threat model's networks (L2, JPEG,
    Gabor, Snow) have a row of their own, across budgets (Fig. 30)."""
    lines = []
    family = rows["training"].where(~rows["training"].isin(LINF_FAMILY), "")
    for _, arch_rows in rows.assign(family=family).groupby(["arch", "family"], sort=True):
        units = arch_rows.drop_duplicates("unit_id")
        units = units.assign(first=units["training"] != "plain").sort_values(["first", "training", "train_eps"])
        maps = []
        for unit in units["unit_id"]:
            unit_rows = arch_rows[arch_rows["unit_id"] == unit]
            r = unit_rows.iloc[0]
            maps.append(cka_heatmap(unit_rows, size=160).properties(title=f"{r['arch']}, {r['setting']}: {r['a']}"))
        lines.append(alt.hconcat(*maps))
    return alt.vconcat(*lines)


FIG4 = "benign vs adversarial, one network (Fig. 4)"
FIG5 = "source vs target on the source's adversarial images (Figs 5b-d)"


def diagonals(similarity: pd.DataFrame) -> pd.DataFrame:
    """CKA at the same point on both sides, for what Cianfarani et al. Figs 4 and 5b-d draw: a network's benign
    against its adversarial representations (`FIG4`), and a source against a target, both on the source's
    adversarial images (`FIG5`); other units (a network with itself on benign images: 1 everywhere; two
    networks on benign images) are left to the matrices. One row per unit and point, with its figure, its
    point family (`family`: how many points the unit compares, so block outputs and every traced node are
    separate panels) and a series label."""
    d = done(similarity)
    d = d[d["a_point"] == d["b_point"]]
    if d.empty:
        return d.assign(unit="", figure="", family="")
    benign_adv = (d["a"] == d["b"]) & (d["a_inputs"] != d["b_inputs"])
    both_adv = (d["a"] != d["b"]) & (d["a_inputs"] == "adversarial") & (d["b_inputs"] == "adversarial")
    d = d.assign(figure=pd.Series(None, index=d.index, dtype=object).mask(benign_adv, FIG4).mask(both_adv, FIG5))
    d = d[d["figure"].notna()]
    if d.empty:
        return d.assign(unit="", family="")
    points = d.groupby("unit_id")["a_point"].transform("nunique")
    titles = {u: unit_title(rows) for u, rows in d.groupby("unit_id", sort=False)}
    d = d.assign(unit=d["unit_id"].map(titles), family=points.map(lambda n: f"{n} points"))
    return d[["unit_id", "unit", "figure", "family", "a_point", "a_index", "cka"]]


def diagonal_chart(diag: pd.DataFrame) -> alt.FacetChart:
    """CKA between the two sides at every point, input to output, one line per unit: a row of panels per figure
    (Fig. 4; Figs 5b-d), a column per point family, each panel its own layer axis."""
    return (
        alt.Chart(diag)
        .mark_line(point=True)
        .encode(
            x=alt.X("a_point:N", sort=alt.SortField("a_index"), title="layer", axis=alt.Axis(labelAngle=-40)),
            y=alt.Y("cka:Q", title="CKA", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("unit:N", title=None, legend=alt.Legend(orient="bottom", columns=1, labelLimit=600)),
            tooltip=["unit:N", "a_point:N", alt.Tooltip("cka:Q", format=".3f")],
        )
        .properties(width=420, height=220)
        .facet(row=alt.Row("figure:N", title=None, sort=[FIG4, FIG5]), column=alt.Column("family:N", title=None))
        .resolve_scale(x="independent")
    )


def transfer_matrix(similarity: pd.DataFrame) -> pd.DataFrame:
    """Cianfarani et al. Fig. 5a: the accuracy of each target (B) on each source's adversarial examples (units
    where B sees examples crafted against another donor), sources as rows; on the diagonal, each source's
    accuracy on its own adversarial examples (white-box: A's accuracy in the units where A is the source and
    sees them)."""
    d = done(similarity)
    d = d[(d["b_inputs"] == "adversarial") & d["attack_source"].notna() & (d["attack_source"] != d["b"])]
    if d.empty:
        return pd.DataFrame()
    first = d.drop_duplicates("unit_id")
    cells = first[["attack_source", "b", "b_acc"]].rename(columns={"b_acc": "acc"})
    own = first[(first["a_inputs"] == "adversarial") & (first["a"] == first["attack_source"])]
    white_box = pd.DataFrame({"attack_source": own["a"], "b": own["a"], "acc": own["a_acc"]})
    table = pd.concat([cells, white_box]).pivot_table(index="attack_source", columns="b", values="acc", aggfunc="mean")
    return table.reset_index()


def _groups(training: pd.DataFrame) -> pd.DataFrame:
    """Done rows, with `group`: the entry's name (or the donor) and the inputs; units of one group are the
    training seeds the paper averages over."""
    d = done(training)
    label = d["name"].where(d["name"].notna() & (d["name"] != ""), d["donor"])
    return d.assign(group=label + " (" + d["inputs"] + ")")


def epoch_curves(training: pd.DataFrame) -> pd.DataFrame:
    """Cianfarani et al. Fig. 6: every point's CKA with the final epoch, per epoch, mean over the units
    (training seeds) of each group, with how many units the mean is over and its interval over them (the paper
    states no band: `analysis.intervals`' rule)."""
    d = _groups(training)
    d = d[d["epoch_b"] == d["final_epoch"]]
    keys = ["group", "point", "point_index", "epoch_a"]
    return with_interval(d, keys, "cka").rename(columns={"n": "units"})


def epoch_curve_chart(curves: pd.DataFrame) -> alt.FacetChart:
    """One line per layer, its band the interval over the group's units (named on the y title's second line, so
    that a long name does not run into the next row of panels)."""
    order = curves.sort_values("point_index")["point"].drop_duplicates().tolist()
    how = " / ".join(sorted(set(curves["interval"].dropna()) - {""})) if "interval" in curves else ""
    colour = alt.Color("point:N", sort=order, title="layer")
    title = ["CKA with the final epoch", f"band: {how or 'one unit'}"]
    y = alt.Y("cka:Q", title=title, scale=alt.Scale(domain=[0, 1]))
    tooltip = ["group:N", "point:N", "epoch_a:Q", alt.Tooltip("cka:Q", format=".3f"), "units:Q"]
    x = alt.X("epoch_a:Q", title="epoch")
    return banded_lines(curves, x, y, colour, tooltip, "group", columns=2, size=(320, 200), opacity=0.15)


def epoch_matrices(training: pd.DataFrame) -> pd.DataFrame:
    """Cianfarani et al. Fig. 25: per group and point, the epoch x epoch CKA, mean over the group's units."""
    d = _groups(training)
    keys = ["group", "point", "point_index", "epoch_a", "epoch_b"]
    return d.groupby(keys, as_index=False).agg(cka=("cka", "mean"), units=("unit_id", "nunique"))


def epoch_matrix_chart(matrices: pd.DataFrame) -> alt.FacetChart:
    order = matrices.sort_values("point_index")["point"].drop_duplicates().tolist()
    return (
        alt.Chart(matrices)
        .mark_rect()
        .encode(
            x=alt.X("epoch_b:O", title="epoch"),
            y=alt.Y("epoch_a:O", title="epoch", sort="descending"),
            color=alt.Color("cka:Q", title="CKA", scale=alt.Scale(domain=[0, 1], scheme="viridis")),
            tooltip=["group:N", "point:N", "epoch_a:O", "epoch_b:O", alt.Tooltip("cka:Q", format=".3f")],
        )
        .properties(width=140, height=140)
        .facet(row=alt.Row("group:N", title=None), column=alt.Column("point:N", sort=order, title=None))
    )


COMPARED = ("cka", "opd", "svcca")  # the measures of Cianfarani et al. B.1


def measures_compared(similarity: pd.DataFrame) -> pd.DataFrame:
    """Cianfarani et al. B.1: each pair of points under full CKA, OPD and SVCCA on the same images (units that
    agree on donors, inputs and images), each measure's value and the seconds it took on the held activations
    (`time_<measure>_s`, and OPD's and SVCCA's as multiples of CKA's); pairs measured under at least two.
    Beside SVCCA: the directions each side kept (`svcca_k_a`, `svcca_k_b`) and `svcca_null`, the score of
    independent data at those k and n (`svcca_null.svcca_null`; empty for parts written before k was kept)."""
    if not len(similarity) or "time_measure_s" not in similarity:
        return pd.DataFrame()
    d = similarity[(similarity["status"] == "done") & similarity["time_measure_s"].notna()]
    d = d.assign(measure=d["measure"].fillna("cka"))
    d = d[d["measure"].isin(COMPARED)]
    if d.empty:
        return pd.DataFrame()
    d = d.assign(value=d.apply(lambda row: row[row["measure"]], axis=1))  # each row's own measure's column
    keys = ["a", "b", "a_inputs", "b_inputs", "images", "a_index", "b_index", "a_point", "b_point"]
    ks = [c for c in SVCCA_K if c in d and d[c].notna().any()]
    wide = d.pivot_table(index=keys, columns="measure", values=["value", "time_measure_s", *ks], aggfunc="mean")
    out = pd.DataFrame(index=wide.index)
    for m in COMPARED:
        if ("value", m) in wide:
            out[m], out[f"time_{m}_s"] = wide[("value", m)], wide[("time_measure_s", m)]
        if m == "svcca" and "svcca" in out:
            out = _svcca_null_beside(out, wide)
    for m in ("opd", "svcca"):  # the main text: CKA "10x and 30x faster than Procrustes and SVCCA"
        if m in out and "cka" in out:
            out[f"{m}_time_x_cka"] = out[f"time_{m}_s"] / out["time_cka_s"]
    out = out.reset_index()
    measured = [m for m in COMPARED if m in out]
    return out[out[measured].notna().sum(axis=1) >= 2].sort_values(keys).reset_index(drop=True)


SVCCA_K = ("svcca_k_a", "svcca_k_b")  # the directions each side's reduction kept (parts since they were kept)


def _svcca_null(images, k_a, k_b) -> float | None:
    if pd.isna(k_a) or pd.isna(k_b):
        return None
    return svcca_null(int(images), int(k_a), int(k_b))


def _svcca_null_beside(out: pd.DataFrame, wide: pd.DataFrame) -> pd.DataFrame:
    """SVCCA's k per side and its null score (independent data at those k and the unit's images) as columns."""
    for c in SVCCA_K:
        out[c] = wide[(c, "svcca")] if (c, "svcca") in wide else float("nan")
    images = out.index.get_level_values("images")
    out["svcca_null"] = [_svcca_null(n, ka, kb) for n, ka, kb in zip(images, out["svcca_k_a"], out["svcca_k_b"])]
    out["svcca_null"] = out["svcca_null"].astype(float)
    return out
