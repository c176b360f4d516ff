"""The training-similarity units' part of the report (Cianfarani et al. 2022 Figs 6, 25): CKA of a donor's
epochs with its final one, and epoch x epoch."""

from __future__ import annotations

from analysis.charts import cka
from analysis.report.sections import ChartSection

CHARTS = [
    ChartSection(
        "CKA with the final epoch across training (Cianfarani et al. 2022 Fig. 6; mean over each group's units)",
        lambda d: cka.epoch_curves(d.of("training_similarity")),
        cka.epoch_curve_chart,
        "cka_epochs.png",
        csv="cka_epochs.csv",
        order=90,
    ),
    ChartSection(
        "Epoch x epoch CKA per layer (Cianfarani et al. 2022 Fig. 25)",
        lambda d: cka.epoch_matrices(d.of("training_similarity")),
        cka.epoch_matrix_chart,
        "cka_epoch_matrices.png",
        order=120,
    ),
]


def sections() -> list[ChartSection]:
    return list(CHARTS)
