"""The inversion units' part of the report (Jones et al. 2022 Fig. 2; Balogh & Jelasity 2023 Figs 9, 27): the
inverted images."""

from __future__ import annotations

import pandas as pd

from analysis.charts import robustness
from analysis.report.sections import ChartSection

CHARTS = [
    ChartSection(
        "Inverted images (Jones et al. 2022 Fig. 2; Balogh & Jelasity 2023 Figs 9, 27): the targets, then each"
        " network's inversions of them",
        lambda d: robustness.inversion_images(d.root, d.of("inversion")) if d.root is not None else pd.DataFrame(),
        robustness.inversion_grid,
        "inversions.png",
        order=150,
    ),
]


def sections() -> list[ChartSection]:
    return list(CHARTS)
