"""Rank-correlation tests of Balogh & Jelasity 2025 Tables 2-3 (Ding, Denain and Steinhardt's framework).

For each representation-test unit and dissimilarity d: Kendall's tau and Spearman's rho between the probing
gap |F(A) - F(B)| and d(A, B) over every B of the unit's set (A included), with one-sided p-values
(alternative: positive correlation, as a good index should show). A unit whose gaps or distances are all
equal has no defined correlation: it is reported with tau = rho = NaN and note "constant", never dropped.
"""

from __future__ import annotations

import warnings

import pandas as pd

from sweep.store.catalogue import dissimilarities


def rank_correlations(reptests: pd.DataFrame) -> pd.DataFrame:
    """One row per (unit, index): n, tau, tau_p, rho, rho_p, note."""
    done = reptests[reptests["status"] == "done"] if "status" in reptests else reptests
    rows = []
    scored = dissimilarities()  # report label -> representation-test column, from the index catalogue
    for unit_id, g in done.groupby("unit_id", sort=False):
        first = g.iloc[0]
        for name, col in scored.items():
            if col not in g or g[col].isna().all():
                continue
            x, y = g["probe_gap"].astype(float), g[col].astype(float)
            row = dict(
                unit_id=unit_id,
                test=first["test"],
                name=first.get("name"),
                arch=first["arch"],
                dataset=first["dataset"],
                index=name,
                n=len(g),
            )
            rows.append(row | rank_correlation(x, y))
    return pd.DataFrame(
        rows,
        columns=["unit_id", "test", "name", "arch", "dataset", "index", "n", "tau", "tau_p", "rho", "rho_p", "note"],
    )


def rank_correlation(x: pd.Series, y: pd.Series, alternative: str = "greater") -> dict:
    """Kendall's tau and Spearman's rho of `x` and `y` with their one-sided p-values (`alternative`: "greater",
    a positive correlation, or "less"); NaN with note "constant" when either does not vary (no correlation)."""
    from scipy.stats import kendalltau, spearmanr

    x, y = pd.Series(x, dtype=float), pd.Series(y, dtype=float)
    if x.nunique() < 2 or y.nunique() < 2:
        return dict(tau=float("nan"), tau_p=float("nan"), rho=float("nan"), rho_p=float("nan"), note="constant")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tau = kendalltau(x, y, alternative=alternative)
        rho = spearmanr(x, y, alternative=alternative)
    return dict(
        tau=float(tau.statistic), tau_p=float(tau.pvalue), rho=float(rho.statistic), rho_p=float(rho.pvalue), note=""
    )


def correlation_table(per_unit: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Tables 2-3: per (test, dataset, arch, index) the mean tau and rho over units, how many units, how many
    of them are significant at `alpha` (one-sided) for both statistics, and how many had a constant input (no
    correlation: left out of the means, which are NaN when every unit was constant)."""
    columns = ["test", "dataset", "arch", "index", "units", "tau", "rho", "significant", "constant"]
    if per_unit.empty:
        return pd.DataFrame(columns=columns)
    g = per_unit.assign(
        sig=(per_unit["tau_p"] < alpha) & (per_unit["rho_p"] < alpha), flat=per_unit["note"].eq("constant")
    )
    order = {k: i for i, k in enumerate(dissimilarities())}
    table = (
        g.groupby(["test", "dataset", "arch", "index"], sort=False)
        .agg(
            units=("unit_id", "nunique"),
            tau=("tau", "mean"),
            rho=("rho", "mean"),
            significant=("sig", "sum"),
            constant=("flat", "sum"),
        )
        .reset_index()
    )
    table[["significant", "constant"]] = table[["significant", "constant"]].astype(int)
    return table.sort_values(
        ["test", "dataset", "arch", "index"], key=lambda s: s.map(order) if s.name == "index" else s
    ).reset_index(drop=True)
