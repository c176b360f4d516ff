"""Layer-by-layer matrices and the layer-identification table of Balogh & Jelasity 2025 (Table 1), from trial rows.

A *measure* scores a (front layer i, end layer j) pair: the relative accuracy of a stitching objective, or a
similarity index of f<=i and g<=j. `layer_matrix` pivots one measure into a front x end matrix;
`layer_identification` asks, for each front layer, whether the measure's best end layer is the
architecturally corresponding one (same stitch point name): intra-network when front and end are the same
donor, inter-network when they are different donors of one architecture (Kornblith et al.'s sanity check).
"""

from __future__ import annotations

import pandas as pd

from analysis.intervals import with_interval
from sweep.store.catalogue import Measure, measures

# objectives in the order the papers discuss them; others follow in alphabetical order
_OBJECTIVE_ORDER = ["tlm", "dm", "dm+tlm", "adv", "adv_mix", "trades"]


def _measures(trials: pd.DataFrame) -> dict[str, Measure]:
    present = set(trials["objective"].dropna().unique()) if "objective" in trials else set()
    ordered = [o for o in _OBJECTIVE_ORDER if o in present] + sorted(present - set(_OBJECTIVE_ORDER))
    return measures(ordered)


def available_measures(trials: pd.DataFrame) -> list[str]:
    """The measures with at least one value among the finished trials."""
    done = trials[trials["status"] == "done"] if "status" in trials else trials
    out = []
    for name, m in _measures(done).items():
        col, objective = m.column, m.objective
        if col not in done:
            continue
        rows = done if objective is None else done[done["objective"] == objective]
        if rows[col].notna().any():
            out.append(name)
    return out


def layer_matrix(trials: pd.DataFrame, front: str, end: str, measure: str) -> pd.DataFrame:
    """front_point x end_point matrix of `measure` (mean over seeds), rows and columns in layer order."""
    m = _measures(trials)[measure]
    col, objective = m.column, m.objective
    t = trials[(trials["status"] == "done") & (trials["front"] == front) & (trials["end"] == end)]
    if objective is not None:
        t = t[t["objective"] == objective]
    t = t[t[col].notna()] if col in t else t.iloc[0:0]
    if t.empty:
        return pd.DataFrame()
    m = t.pivot_table(index="front_point", columns="end_point", values=col, aggfunc="mean")
    rows = t[["front_point", "point_index"]].drop_duplicates().sort_values("point_index")["front_point"]
    cols = t[["end_point", "end_index"]].drop_duplicates().sort_values("end_index")["end_point"]
    return m.reindex(index=list(dict.fromkeys(rows)), columns=list(dict.fromkeys(cols)))


def long_matrices(trials: pd.DataFrame) -> pd.DataFrame:
    """Every pair's matrices in long format: front, end, measure, front_point, end_point, point_index,
    end_index, value (the mean over seeds), seeds (how many it is over), and for an index measured with a
    permutation null its largest p-value over seeds (`null_p`) and whether every seed beat the null at
    `ALPHA` (`above_null`): what the heatmaps draw and `layer_matrices.csv` holds."""
    rows = []
    done = trials[trials["status"] == "done"]
    for pair in done[["front", "end"]].drop_duplicates().itertuples(index=False):
        mine = done[(done["front"] == pair.front) & (done["end"] == pair.end)]
        for measure in available_measures(mine):
            m = layer_matrix(done, pair.front, pair.end, measure)
            seeds, null_p = _seed_counts(mine, measure), _null_p(mine, measure)
            for i, fp in enumerate(m.index, start=1):
                for j, ep in enumerate(m.columns, start=1):
                    if pd.notna(m.loc[fp, ep]):
                        cell = dict(
                            front_point=fp, end_point=ep, point_index=i, end_index=j, value=float(m.loc[fp, ep])
                        )
                        p = null_p.get((fp, ep), float("nan"))
                        cell.update(seeds=seeds[fp, ep], null_p=p, above_null=None if pd.isna(p) else bool(p < ALPHA))
                        rows.append(dict(front=pair.front, end=pair.end, measure=measure, **cell))
    return pd.DataFrame(rows, columns=[*_LONG, "seeds", "null_p", "above_null"])


ALPHA = 0.05  # a value is above its permutation null when its p-value is below this, for every seed
_LONG = ["front", "end", "measure", "front_point", "end_point", "point_index", "end_index", "value"]


def _seed_counts(trials: pd.DataFrame, measure: str) -> dict:
    """(front_point, end_point) -> how many seeds measured `measure` there."""
    m = _measures(trials)[measure]
    t = trials if m.objective is None else trials[trials["objective"] == m.objective]
    t = t[t[m.column].notna()]
    return t.groupby(["front_point", "end_point"])["seed"].nunique().to_dict()


def _null_p(trials: pd.DataFrame, measure: str) -> dict:
    """(front_point, end_point) -> the largest permutation p-value of `measure` over its seeds (none: absent)."""
    m = _measures(trials)[measure]
    col = f"{m.column}_p"
    if m.objective is not None or col not in trials or trials[col].isna().all():
        return {}
    return trials[trials[col].notna()].groupby(["front_point", "end_point"])[col].max().to_dict()


def layer_identification(trials: pd.DataFrame) -> pd.DataFrame:
    """Balogh & Jelasity 2025 Table 1: per measure, the share of front layers whose most similar end layer (by that
    measure, over every end layer tried) is the architecturally corresponding one. One row per (measure,
    kind: intra | inter), averaged over donor pairs, with its interval over pairs (`lo`, `hi`, `interval`:
    `analysis.intervals`); only layers whose whole row was measured count."""
    done = trials[trials["status"] == "done"]
    results = []
    for pair in done[["front", "end"]].drop_duplicates().itertuples(index=False):
        kind = "intra" if pair.front == pair.end else "inter"
        for measure in available_measures(done[(done["front"] == pair.front) & (done["end"] == pair.end)]):
            m = _measures(done)[measure]
            if not m.for_identification:
                continue
            higher = m.larger_is_more_similar
            m = layer_matrix(done, pair.front, pair.end, measure)
            hits = []
            for fp in m.index:
                row = m.loc[fp]
                if fp not in m.columns or row.isna().any() or len(row) < 2:
                    continue
                best = row.idxmax() if higher else row.idxmin()
                hits.append(best == fp)
            if hits:
                results.append(
                    dict(
                        measure=measure,
                        kind=kind,
                        front=pair.front,
                        end=pair.end,
                        layers=len(hits),
                        accuracy=sum(hits) / len(hits),
                    )
                )
    per_pair = pd.DataFrame(results, columns=["measure", "kind", "front", "end", "layers", "accuracy"])
    if per_pair.empty:
        return pd.DataFrame(columns=["measure", "kind", "pairs", "layers", "accuracy", "lo", "hi", "interval"])
    table = (
        per_pair.groupby(["measure", "kind"], sort=False)
        .agg(pairs=("front", "size"), layers=("layers", "sum"))
        .reset_index()
        .merge(with_interval(per_pair, ["measure", "kind"], "accuracy").drop(columns="n"), on=["measure", "kind"])
    )
    order = {m: i for i, m in enumerate(_measures(done))}
    return table.sort_values(
        ["kind", "measure"], key=lambda s: s.map(order) if s.name == "measure" else s, ascending=[False, True]
    ).reset_index(drop=True)


def generalisation(donors: pd.DataFrame) -> pd.DataFrame:
    """Cianfarani et al. 2022 Table 1: each donor's benign and robust accuracy on training and test images,
    and the gaps (train - test), from the donors' own evaluations (the rows that measured training images)."""
    if donors.empty or "train_clean_acc" not in donors or donors["train_clean_acc"].isna().all():
        return pd.DataFrame()
    d = donors[donors["train_clean_acc"].notna()]
    columns = ["donor", "arch", "training", "train_eps", "dataset", "eps", "train_clean_acc", "clean_acc"]
    out = d[[c for c in columns if c in d]].copy()
    out["clean_gap"] = d["train_clean_acc"] - d["clean_acc"]
    out["train_robust_acc"] = d["train_robust_acc"]
    out["robust_acc"] = d["robust_acc"]
    out["robust_gap"] = d["train_robust_acc"] - d["robust_acc"]
    return out.sort_values("donor").reset_index(drop=True)


AGREEMENT = ["head_agreement", "agree_both_correct", "agree_both_wrong", "agree_disagree"]


def agreement_table(trials: pd.DataFrame, by: tuple[str, ...] = ("objective", "front_point", "end_point")):
    """Agreement of stitched networks with their end network (Jones et al. 2022 4.5, Figs 7-8): for each group
    of `by`, the mean over its trials that stitch two different donors, and the standard error of that mean
    (`<measure>_se`: sample std / sqrt(n); NaN for one trial), with `pairs` = n. A trial of self-stitching
    agrees with its end network wherever the fit succeeds, so it is left out."""
    present = [c for c in AGREEMENT if c in trials]
    if "head_agreement" not in present or not len(trials):
        return pd.DataFrame()
    d = trials[(trials["front"] != trials["end"]) & trials["head_agreement"].notna()]
    if d.empty:
        return pd.DataFrame()
    groups = d.groupby(list(by), sort=False)
    out = groups[present].mean()
    se = groups[present].std(ddof=1) / groups[present].count().pow(0.5)
    for c in present:
        out[f"{c}_se"] = se[c]
    out["pairs"] = groups.size()
    return out[[x for c in present for x in (c, f"{c}_se")] + ["pairs"]].reset_index()
