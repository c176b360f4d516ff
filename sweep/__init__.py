"""stitchsweep's engine: search spaces, donors, stitching trials and their Parquet results.

Importing `sweep` imports neither Ray nor torch; `sweep.backends.ray` is the one module that imports Ray.
"""

__version__ = "0.1.0"
