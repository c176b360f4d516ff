"""The donors' part of the report: their training curves, and the donors table with their accuracy on training
and test images."""

from __future__ import annotations

import pandas as pd

from analysis.charts import curves
from analysis.charts.stitching import donor_curves_chart
from analysis.matrices import generalisation
from analysis.report.sections import ChartSection
from analysis.report.table_sections import TableSection
from sweep.store.layout import DONOR_CURVES_DIR

COLUMNS = [
    "donor",
    "arch",
    "dataset",
    "training",
    "train_eps",
    "beta",
    "epochs",
    "freeze",
    "train_size",
    "eval_dataset",
    "test_size",
    "clean_acc",
    "robust_acc",
    "n_eval_robust",
    "eps",
    "attack_iterations",
    "trained_now",
    "at_chance",
]
ATTACK_COLUMNS = ["robust_acc", "eps", "attack_iterations"]  # what a donor evaluated without attack lacks


def donor_rows(donors: pd.DataFrame) -> pd.DataFrame:
    """The donors by name, the attack's settings blank where no image was attacked (`n_eval_robust` 0: an
    "eps 0.300" of a plain evaluation would read as a measured robustness)."""
    if donors.empty:
        return donors
    out = donors.sort_values([c for c in ("donor", "eval_dataset") if c in donors], kind="stable")
    if "n_eval_robust" in out:
        unattacked = out["n_eval_robust"].fillna(0) == 0
        out = out.assign(**{c: out[c].where(~unattacked) for c in ATTACK_COLUMNS if c in out})
    return out


CHARTS = [
    ChartSection(
        "Donor training curves: training, validation and adversarial validation loss per epoch",
        lambda d: d.table(DONOR_CURVES_DIR),
        donor_curves_chart,
        "donor_curves.png",
        csv="donor_curves.csv",
        order=100,
    ),
    ChartSection(
        "Training curves averaged over seeds (Cianfarani et al. 2022 Fig. 6's losses): donors of one recipe"
        " but their seed, mean per epoch with an interval over them",
        lambda d: curves.mean_curves(d.table(DONOR_CURVES_DIR), d.donors),
        curves.mean_curve_chart,
        "donor_curves_mean.png",
        csv="donor_curves_mean.csv",
        order=110,
    ),
]


TABLES = [
    TableSection("Donors", lambda d: donor_rows(d.donors), columns=COLUMNS, csv="donors.csv", always=True, order=150),
    TableSection(
        "Donors on training and test images (Cianfarani et al. 2022 Table 1)",
        lambda d: generalisation(donor_rows(d.donors)),
        "Benign and robust accuracy on the first training images and on the test images (the donor's own"
        " evaluation: as many images, the same attack), and the gaps (train - test).",
        csv="donor_generalisation.csv",
        md="donor_generalisation.md",
        order=160,
    ),
]


def sections() -> list[ChartSection]:
    return list(CHARTS)


def tables() -> list[TableSection]:
    return list(TABLES)
