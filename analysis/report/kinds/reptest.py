"""The representation-test units' part of the report (Balogh & Jelasity 2025 Section 5): no chart; the
rank-correlation tests, their mean over units on the page and per unit in a CSV."""

from __future__ import annotations

import pandas as pd

from analysis.report.data import ReportData
from analysis.report.table_sections import TableSection
from analysis.stats import correlation_table, rank_correlations


def correlations_per_unit(data: ReportData) -> pd.DataFrame:
    rows = data.of("reptest")
    return rank_correlations(rows) if len(rows) else pd.DataFrame()


def correlations(data: ReportData) -> pd.DataFrame:
    per_unit = data.derived(correlations_per_unit)
    return correlation_table(per_unit) if len(data.of("reptest")) else pd.DataFrame()


TABLES = [
    TableSection(
        "Rank-correlation tests (Balogh & Jelasity 2025 Tables 2-3)",
        lambda d: d.derived(correlations),
        "Kendall's tau and Spearman's rho between the probing gap |F(A) - F(B)| and each dissimilarity"
        " d(A, B), mean over units; <i>significant</i>: units with both one-sided p-values below 0.05;"
        " <i>constant</i>: units where the gap or the dissimilarity did not vary (no correlation, left out of the"
        " means; all of them: no mean).",
        csv="rank_correlations.csv",
        md="rank_correlations.md",
        order=10,
    ),
    TableSection(
        "Rank-correlation tests per unit",
        lambda d: d.derived(correlations_per_unit),
        csv="rank_correlations_per_unit.csv",
        order=10,
        page=False,
    ),
]


def sections() -> list:
    """No chart: its tables only."""
    return []


def tables() -> list[TableSection]:
    return list(TABLES)
