"""Analysis of stitchsweep results: Parquet -> pandas -> Altair charts and an HTML report.

Imports neither torch nor ray: results can be analysed anywhere pandas runs.
"""

from .load import load, load_curves, load_donors, load_reptests, load_similarity, load_trials, read_table

__all__ = ["load", "load_trials", "load_donors", "load_curves", "load_reptests", "load_similarity", "read_table"]
