"""The report's tables, in order: each is one entry of `TABLES` (title, which rows of the report's data, an
introduction, the columns shown, the files to write). `analysis.report.write` draws them after `sections.CHARTS`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from analysis.charts import cka, per_point, robustness, senders
from analysis.donors import mark_trials
from analysis.matrices import agreement_table, generalisation
from analysis.report.sections import varies

if TYPE_CHECKING:
    from analysis.report.data import ReportData

TRIAL_COLUMNS = [
    "trial_id",
    "front",
    "end",
    "dataset",
    "front_point",
    "end_point",
    "setting",
    "seed",
    "clean_acc",
    "relative_acc",
    "receiver_acc",
    "robust_acc",
    "most_frequent_class_ratio",
    "dm_residual",
    "time_fit_s",
    "time_total_s",
    "donor_at_chance",
]
DONOR_COLUMNS = [
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


@dataclass(frozen=True)
class TableSection:
    """A table of the report: shown when `data` has rows, saved as `csv` (and `md`)."""

    title: str
    data: Callable[[ReportData], pd.DataFrame]
    intro: str | Callable[[pd.DataFrame], str] = ""  # HTML; a function of the rows where it depends on them
    columns: list[str] | None = None  # None: every column
    csv: str | None = None
    md: str | None = None
    always: bool = False  # shown, and its CSV written, even without rows (the donors, the trials)
    # the sweep's report shows it only when this holds of its rows (`sections.varies`); a paper's page always
    shown: Callable[[pd.DataFrame], bool] | None = None

    @property
    def name(self) -> str | None:
        """What a notebook asks for it by (`analysis.table`): its CSV's stem; None when it writes no CSV."""
        return self.csv.rsplit(".", 1)[0] if self.csv else None

    def intro_for(self, rows: pd.DataFrame) -> str:
        """The introduction shown above `rows` (HTML; empty for none)."""
        return self.intro(rows) if callable(self.intro) else self.intro


def _chance_note(rows: pd.DataFrame) -> str:
    """The trials table's note on donors at chance, where some trial has one."""
    if "donor_at_chance" not in rows or not (rows["donor_at_chance"].fillna("") != "").any():
        return ""
    return (
        "<i>donor_at_chance</i> names a donor of the trial that ended training at chance accuracy: read its"
        " numbers with care."
    )


TABLES = [
    TableSection(
        "Rank-correlation tests (Balogh & Jelasity 2025 Tables 2-3)",
        lambda d: d.correlations,
        "Kendall's tau and Spearman's rho between the probing gap |F(A) - F(B)| and each dissimilarity"
        " d(A, B), mean over units; <i>significant</i>: units with both one-sided p-values below 0.05;"
        " <i>constant</i>: units where the gap or the dissimilarity did not vary (no correlation, left out of the"
        " means; all of them: no mean).",
        csv="rank_correlations.csv",
        md="rank_correlations.md",
    ),
    TableSection(
        "Stitched accuracy at the first point, sender x receiver (Smith & Marcu 2024 Table C1)",
        lambda d: senders.first_point_table(d.trials, d.donors),
        "Mean over runs (initialisations and seeds); a row is a model type as sender, a column as receiver, one"
        " block per stitching dataset (stitched_on); base_acc: the type's own accuracy on the stitching test data;"
        " compatible R: the stitch at or above receiver R's own accuracy on those images (the paper's"
        " compatibility). Noise senders are in the next table.",
        csv="sender_receiver_first_point.csv",
        md="sender_receiver_first_point.md",
        shown=varies("sender"),
    ),
    TableSection(
        "Clustered noise into receivers at the first point (Smith & Marcu 2024 Section 4.2, C5)",
        lambda d: senders.first_point_table(d.trials, d.donors, noise=True),
        "Mean over runs; base_acc: the receivers' accuracy on the sweep's test images; compatible R: the stitch at"
        " or above receiver R's.",
        csv="noise_first_point.csv",
    ),
    TableSection(
        "Stitching from noise: stitcher and noise initialisations (Smith & Marcu 2024 C.2)",
        lambda d: senders.noise_initialisations(d.trials),
        "Noise senders with their own seed: the stitched accuracy over stitcher initialisations on one noise"
        " dataset, and over noise datasets with one initialisation (the paper: 40-80% over initialisations).",
        csv="noise_initialisations.csv",
        md="noise_initialisations.md",
    ),
    TableSection(
        "Accuracy of each model type on its own test set (Smith & Marcu 2024 Table C2)",
        lambda d: senders.own_accuracy_table(d.trials, d.donors),
        "Mean over the type's initialisations.",
        csv="model_accuracy.csv",
        md="model_accuracy.md",
        shown=varies("model"),
    ),
    TableSection(
        "Transfer robustness (Cianfarani et al. 2022 Fig. 5a)",
        lambda d: cka.transfer_matrix(d.similarity),
        "Accuracy of each target network (columns) on adversarial examples crafted against each source (rows).",
        csv="transfer_matrix.csv",
        md="transfer_matrix.md",
    ),
    TableSection(
        "CKA, Procrustes and SVCCA on the same representations (Cianfarani et al. 2022 B.1)",
        lambda d: cka.measures_compared(d.similarity),
        "Each pair of points under full-batch linear CKA, the orthogonal Procrustes distance (OPD: 0 for the same"
        " representation, lower is more similar) and SVCCA (mean canonical correlation of the 99%-variance"
        " reductions, at most svcca_max_k directions each), on the same images; svcca_k_a, svcca_k_b: the"
        " directions each side kept; svcca_null: the SVCCA of independent data at those k and images (what"
        " SVCCA must exceed); time_*_s: the seconds each took on the held activations.",
        csv="measures_compared.csv",
        md="measures_compared.md",
    ),
    TableSection(
        "Unreadable results parts",
        lambda d: d.problems,
        "Skipped: these files could not be read as results (rerun <code>stitchsweep resume</code> to"
        " recompute their trials).",
        ["path", "kind", "error"],
        csv="problems.csv",
    ),
    TableSection(
        "Layer identification (Balogh & Jelasity 2025 Table 1)",
        lambda d: d.identification,
        "Share of front layers whose most similar end layer, by each measure, is the corresponding one"
        " (intra: a donor with itself; inter: two donors of one architecture).",
        csv="layer_identification.csv",
        md="layer_identification.md",
    ),
    TableSection(
        "Agreement with the end network after stitching (Jones et al. 2022 4.5, Figs 7-8)",
        lambda d: agreement_table(d.done),
        "Share of test images on which the stitched network predicts what the end network does: overall, where"
        " both donors give the correct label, the same wrong label, or different labels; mean and standard"
        " error over the trials stitching two different donors.",
        csv="agreement.csv",
        md="agreement.md",
    ),
    TableSection(
        "Agreement with the head by robustness level (Jones et al. 2022 Figs 7-8)",
        lambda d: robustness.agreement_by_level(d.done, d.donors),
        "Pairs of two different donors trained at the same eps (0: plain), of the architectures present at every"
        " level; mean and standard error over pairs.",
        csv="agreement_by_level.csv",
        md="agreement_by_level.md",
        shown=varies("eps"),
    ),
    TableSection(
        "Block structure (Cianfarani et al. 2022 Fig. 2): mean CKA of a network with itself between points more"
        " than 20 apart",
        lambda d: cka.block_structure(d.similarity, d.donors),
        intro="Distant layers that represent alike make the bright squares of Fig. 2; <i>far_cka</i> is their mean"
        " CKA (<i>pairs</i>: how many ordered pairs of points are more than 20 apart), <i>mean_cka</i> the mean over"
        " every pair of distinct points.",
        csv="block_structure.csv",
    ),
    TableSection(
        "One threat model across budgets (Cianfarani et al. 2022 Fig. 30): two networks of one training method at"
        " different budgets, on benign images",
        lambda d: cka.budget_steps(d.similarity, d.donors),
        "<i>diagonal_cka</i>: the mean CKA at the same point of the two networks; <i>mean_cka</i>: over every pair"
        " of points."
        " Neighbouring budgets whose diagonal stays high: representations that change gradually with the budget.",
        csv="budget_steps.csv",
    ),
    TableSection(
        "Stitched accuracy against each index at the same stitch point",
        lambda d: per_point.correlations(d.same_task),
        "Per donor pair, setting and index measured in the trials (<code>indices:</code>): Kendall's tau and"
        " Spearman's rho between the stitched accuracy (mean over seeds) and the index across the stitch points"
        " (<i>points</i>), one-sided towards more similar, more accurate, as in Balogh &amp; Jelasity 2025 Tables"
        " 2-3; <i>constant</i>: the accuracy or the index did not vary.",
        csv="index_vs_accuracy.csv",
    ),
    TableSection("Donors", lambda d: donor_rows(d.donors), columns=DONOR_COLUMNS, csv="donors.csv", always=True),
    TableSection(
        "Donors on training and test images (Cianfarani et al. 2022 Table 1)",
        lambda d: generalisation(donor_rows(d.donors)),
        "Benign and robust accuracy on the first training images and on the test images (the donor's own"
        " evaluation: as many images, the same attack), and the gaps (train - test).",
        csv="donor_generalisation.csv",
        md="donor_generalisation.md",
    ),
    TableSection(
        "Failed trials",
        lambda d: d.failed,
        columns=["trial_id", "front", "end", "front_point", "end_point", "setting", "error"],
    ),
    TableSection(
        "Trials",
        lambda d: mark_trials(d.done, d.donors).sort_values(
            [c for c in ("front", "end", "point_index", "end_index", "setting", "seed") if c in d.done]
        ),
        intro=_chance_note,
        columns=TRIAL_COLUMNS,
        always=True,
    ),
]
