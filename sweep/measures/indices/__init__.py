"""The similarity indices a search space may request (`indices:`), as registered entries: each pairs its
torch-free catalogue entry (`sweep.store.catalogue`: name, columns, direction) with how the engine computes it
from a pair of activations (`Pair`) and what planning charges it before it runs (its memory and work models,
built from `sweep.costs`).

Each shipped index is one module of this package, holding all of it: its `IndexEntry`, its memory model
(`numbers(rows, pa, pb)`, or its bytes on a pair of shapes), its work model (`count(rows, pa, pb)`, or its
`Work` on a pair), its math (PyTorch, imported inside the functions: reading the registry, as checking a space
does, imports no PyTorch) and its `register_index` call: `cka.py` (Eq. 4), `pwcca.py` (Eq. 5-6), `opd.py`
(Eq. 8), `dm.py` (2.3), `rank.py` (B.2.1: `rank` and `receiver_rank`), `svcca.py` and `saliency.py` (measures
of `similarity:` entries only); `rsa.py`, `mknn.py`, `linreg.py`, `cka_debiased.py` (beyond the papers).
Importing this package registers them, in that order (the order of the
catalogue's columns); the catalogue populates itself from it.

A new index is one call of `register_index` with its catalogue entry and its function (see docs/development.md):
its Parquet columns, its place in the layer matrices, Table 1 and the rank-correlation tables follow.
"""

from __future__ import annotations

from sweep.measures.indices.base import SIMILARITY_BY, Index, Network, Pair, register_index
from sweep.registry import INDICES

# isort: off
# The shipped indices, each registered as it is imported: this order is the catalogue's, and its columns'.
from sweep.measures.indices import cka, pwcca, opd, dm, rank, svcca, saliency
from sweep.measures.indices import rsa, mknn, linreg, cka_debiased

# isort: on
from sweep.measures.indices.rank import receiver_rank

SHIPPED = (cka, pwcca, opd, dm, rank, svcca, saliency, rsa, mknn, linreg, cka_debiased)

__all__ = ["INDICES", "SHIPPED", "SIMILARITY_BY", "Index", "Network", "Pair", "receiver_rank", "register_index"]
