"""Analysis of stitchsweep results: Parquet -> pandas -> Altair charts and an HTML report.

Imports neither torch nor ray: results can be analysed anywhere pandas runs.
"""

from .load import load, load_curves, load_donors, load_reptests, load_similarity, load_trials, read_table
from .notebook import figure, figures, report_data, table, tables

__all__ = [
    "load",
    "load_trials",
    "load_donors",
    "load_curves",
    "load_reptests",
    "load_similarity",
    "read_table",
    "report_data",
    "figure",
    "figures",
    "table",
    "tables",
]
