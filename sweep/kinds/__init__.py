"""Kinds of work, one module each, pure PyTorch and idempotent, one Parquet part per unit: donors
(`donor.py`: train or load, evaluate), stitching trials (`stitch.py`), representation-test units
(`reptest.py`)."""
