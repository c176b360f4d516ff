"""Kinds of work, one module each, pure PyTorch and idempotent, one Parquet part per unit, each one registered
`Kind` entry (`base.py`): donors (`donor.py`: train or load, evaluate), stitching trials (`stitch.py`),
representation-test units (`reptest.py`). Importing the package registers them, in the order they run."""

from sweep.kinds import donor, reptest, stitch  # noqa: F401  (each registers its kind)
