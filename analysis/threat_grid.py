"""Cianfarani et al. 2022 Fig. 7 in the paper's layout: a row per reference network (the L-inf one, the Snow
one), its own layer x layer CKA map first, then its map against each other threat model's network, the columns
in the paper's order of threat models (L-inf, L2, JPEG, Gabor, Snow)."""

from __future__ import annotations

import altair as alt
import pandas as pd

from .cka import cka_heatmap, done

THREAT_ORDER = ("pgd", "pgd_l2", "adv_jpeg", "adv_gabor", "adv_snow")  # L-inf, L2, JPEG, Gabor, Snow
_SWAP = {"a": "b", "b": "a", "a_point": "b_point", "b_point": "a_point", "a_index": "b_index", "b_index": "a_index"}


def threat_rows(similarity: pd.DataFrame, donors: pd.DataFrame) -> pd.DataFrame:
    """The benign units of networks trained against a threat model, with themselves or with another threat
    model's network, arranged: `row` (the reference
    network: one that is side A of two or more units with other networks), `column` (the position of the other
    side's threat model; its own map first, column 0). A unit whose reference is its side B is transposed, so
    the reference's layers are always the map's rows."""
    d = done(similarity)
    if d.empty or donors.empty:
        return pd.DataFrame()
    training = donors.drop_duplicates("ref").set_index("ref")["training"]
    d = d[(d["a_inputs"] == "benign") & (d["b_inputs"] == "benign")]
    d = d[d["a"].map(training).isin(THREAT_ORDER) & d["b"].map(training).isin(THREAT_ORDER)]
    # a network with itself, or with another threat model's (two budgets of one threat model: Fig. 30's tables)
    d = d[(d["a"] == d["b"]) | (d["a"].map(training) != d["b"].map(training))]
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
