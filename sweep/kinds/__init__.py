"""Kinds of work, one module each, pure PyTorch and idempotent, one Parquet part per unit, each one registered
`Kind` entry (`base.py`): donors (`donor.py`: train or load, evaluate), stitching trials (`stitch.py`),
representation-test units (`reptest.py`), representation inversion (`inversion.py`), similarity units
without stitching (`similarity.py`), CKA across training epochs (`training_similarity.py`), t-SNE maps
(`embedding.py`). Importing the package registers them, in the order they run (and their sections are parsed):
donors first, since the others read them."""

# isort: off
from sweep.kinds import donor  # noqa: F401  (each registers its kind)
from sweep.kinds import stitch  # noqa: F401
from sweep.kinds import reptest  # noqa: F401
from sweep.kinds import inversion  # noqa: F401  (before similarity: it reads inverted images)
from sweep.kinds import similarity  # noqa: F401
from sweep.kinds import training_similarity  # noqa: F401
from sweep.kinds import embedding  # noqa: F401
# isort: on
