"""Kinds of work, each one registered `Kind` entry (`base.py`): donors (`donor.py`: train or load, evaluate),
stitching trials (`stitch.py`), representation-test units (`reptest.py`), representation inversion
(`inversion.py`), similarity units without stitching (`similarity.py`), CKA across training epochs
(`training_similarity.py`), t-SNE maps (`embedding.py`). Importing the package registers them
(`declared.py`, which imports no PyTorch: each kind's work module loads when a unit runs), in the order they
run and their sections are parsed: donors first, since the others read them."""

from sweep.kinds import declared  # noqa: F401  (registers the shipped kinds)
