"""stitchsweep's engine: search spaces, donors, stitching trials and their Parquet results.

Importing `sweep` imports neither Ray nor torch; `sweep.backends` (`ray.py`, `checks.py`) alone imports Ray.
"""

__version__ = "0.1.0"
