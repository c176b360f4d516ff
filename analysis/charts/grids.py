"""Two of Cianfarani et al. 2022's grids of layer x layer CKA maps in the paper's layout. Fig. 7: a row per
reference network (the L-inf one, the Snow one), its own map first, then its map against each other threat
model's network at that threat model's main budget, the columns in the paper's order of threat models (L-inf,
L2, JPEG, Gabor, Snow); other budgets are Appendix E's and Fig. 30's. Fig. 3: each
network with itself, a row per training budget (plain first) and a column per width."""

from __future__ import annotations

import re

import altair as alt
import pandas as pd

from analysis.charts.cka import cka_heatmap, done, within_networks

THREAT_ORDER = ("pgd", "pgd_l2", "adv_jpeg", "adv_gabor", "adv_snow")  # L-inf, L2, JPEG, Gabor, Snow
_SWAP = {"a": "b", "b": "a", "a_point": "b_point", "b_point": "a_point", "a_index": "b_index", "b_index": "a_index"}


def main_budget_networks(cross: pd.DataFrame, training: pd.Series) -> set[str]:
    """Per threat model, the network at its main budget: of its networks, the one compared (on either side of
    a unit in `cross`, benign units of networks of two threat models) with the networks of the most other
    threat models, then, of those, with the most other networks (one after the other: where the network with
    the most threat models is not the one with the most networks, the first is kept). A design like the
    paper's compares the main budget with every threat model (Fig. 7) and varies budgets around it against one
    or two (Appendix E, Fig. 30), so the main budget is the one that the comparison across threat models is
    built around. Read from which pairs were measured rather than from budgets or entry names: no budget is
    "main" by value (the paper gives none for four of the five threat models), and a space may name its entries
    as it likes. Ties keep every tied network (the layout then shows them side by side rather than choosing
    silently)."""
    sides = pd.concat([cross[["a", "b"]], cross[["b", "a"]].set_axis(["a", "b"], axis=1)]).drop_duplicates()
    sides = sides.assign(threat=sides["a"].map(training), other=sides["b"].map(training))
    reach = sides.groupby("a").agg(threats=("other", "nunique"), networks=("b", "nunique"), threat=("threat", "first"))
    widest = reach[reach["threats"] == reach.groupby("threat")["threats"].transform("max")]
    return set(widest.index[widest["networks"] == widest.groupby("threat")["networks"].transform("max")])


def threat_rows(similarity: pd.DataFrame, donors: pd.DataFrame) -> pd.DataFrame:
    """Fig. 7's units: networks trained against a threat model, each at its threat model's main budget
    (`main_budget_networks`), with themselves or with another threat model's, on benign images, arranged:
    `row` (the reference network: one that is side A of two or more units with other networks), `column` (the
    position of the other side's threat model; its own map first, column 0). Two budgets of one threat model
    (Fig. 30) and a budget neighbour against another threat model (Appendix E) are left out. A unit whose
    reference is its side B is transposed, so the reference's layers are always the map's rows."""
    d = done(similarity)
    if d.empty or donors.empty:
        return pd.DataFrame()
    training = donors.drop_duplicates("ref").set_index("ref")["training"]
    d = d[(d["a_inputs"] == "benign") & (d["b_inputs"] == "benign")]
    d = d[d["a"].map(training).isin(THREAT_ORDER) & d["b"].map(training).isin(THREAT_ORDER)]
    # a network with itself, or with another threat model's (two budgets of one threat model: Fig. 30's tables)
    d = d[(d["a"] == d["b"]) | (d["a"].map(training) != d["b"].map(training))]
    main = main_budget_networks(d[d["a"] != d["b"]].drop_duplicates("unit_id"), training)
    d = d[d["a"].isin(main) & d["b"].isin(main)]
    cross = d[d["a"] != d["b"]].drop_duplicates("unit_id")
    counts = cross["a"].value_counts()
    references = sorted(counts[counts >= 2].index, key=lambda r: (THREAT_ORDER.index(training[r]), r))
    out = []
    for ref in references:
        mine = d[(d["a"] == ref) | (d["b"] == ref)]
        for _, unit in mine.groupby("unit_id", sort=False):
            unit = unit if unit["a"].iloc[0] == ref else unit.rename(columns=_SWAP)
            other = unit["b"].iloc[0]
            column = 0 if other == ref else 1 + THREAT_ORDER.index(training[other])
            out.append(unit.assign(row=ref, column=column))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def threat_grid(rows: pd.DataFrame, size: int = 150) -> alt.VConcatChart:
    """A row of heatmaps per reference network, its own map first, then one per threat model in order."""
    lines = []
    for _, ref_rows in rows.groupby("row", sort=False):
        maps = []
        for _, unit in sorted(ref_rows.groupby("unit_id", sort=False), key=lambda kv: kv[1]["column"].iloc[0]):
            maps.append(cka_heatmap(unit, size=size).properties(title=f"{unit['a'].iloc[0]} ~ {unit['b'].iloc[0]}"))
        lines.append(alt.hconcat(*maps))
    return alt.vconcat(*lines)


def _natural(name: str) -> tuple:
    """'wrn28_5' before 'wrn28_10': digits compared as numbers."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def eps_width_rows(similarity: pd.DataFrame, donors: pd.DataFrame) -> pd.DataFrame:
    """Fig. 3's networks: plain and PGD networks with themselves on benign images, where two or more
    architectures (widths) are present, each with `row` (its budget: 0 for plain) and `column` (its
    architecture's place, widths in numeric order)."""
    d = within_networks(similarity, donors)
    if d.empty:
        return d
    d = d[d["training"].isin(["plain", "pgd"])]
    archs = sorted(d["arch"].unique(), key=_natural)
    if len(archs) < 2:
        return d.iloc[0:0]
    return d.assign(row=d["train_eps"], column=d["arch"].map({a: k for k, a in enumerate(archs)}))


def eps_width_grid(rows: pd.DataFrame, size: int = 130) -> alt.VConcatChart:
    """A row per budget (plain first), a column per width; a cell without a network left blank."""
    columns = rows.drop_duplicates("column").sort_values("column")["arch"].tolist()
    lines = []
    for _, at_eps in rows.groupby("row", sort=True):
        maps = []
        for k, arch in enumerate(columns):
            cell = at_eps[at_eps["column"] == k]
            if cell.empty:
                maps.append(alt.Chart(pd.DataFrame({"x": [0]})).mark_text().properties(width=size, height=size))
                continue
            unit = cell[cell["unit_id"] == cell["unit_id"].iloc[0]]
            title = f"{arch}, {unit['setting'].iloc[0]}"
            maps.append(cka_heatmap(unit, size=size).properties(title=title))
        lines.append(alt.hconcat(*maps))
    return alt.vconcat(*lines)
