"""The examples units' part of the report (Smith & Marcu 2024 Fig. 1a, Figs A1-A2; Cianfarani et al. 2022
Fig. 8): example pictures."""

from __future__ import annotations

from analysis.charts import examples
from analysis.report.sections import ChartSection

CHARTS = [
    ChartSection(
        "Example pictures (Smith & Marcu 2024 Fig. 1a, Figs A1-A2; Cianfarani et al. 2022 Fig. 8): images of"
        " each class, colour maps, clustered-noise samples as feature maps, and images attacked under each"
        " threat model with their perturbations (magnified)",
        lambda d: examples.pictures(d.of("examples")),
        examples.examples_chart,
        "examples.png",
        order=170,
    ),
]


def sections() -> list[ChartSection]:
    return list(CHARTS)
