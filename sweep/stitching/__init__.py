"""The stitching layer (`stitcher.py`) and the objectives that fit it (`objectives.py`, a registry)."""
