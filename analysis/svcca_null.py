"""SVCCA's null score: the mean canonical correlation of *independent* data at a pair's own k_A, k_B and n.

SVCCA (Raghu et al. 2017) keeps k directions per side and averages min(k_A, k_B) canonical correlations on n
examples. Canonical correlations fit the examples, so independent data score well above zero once k is a fair
part of n (about 0.19 at k = 50, 0.33 at k = 150 for n = 1,000): a measured value means something only above
the null at its own k and n. Computed here by drawing independent Gaussian data (numpy, a fixed seed), not
read from a table, so it follows whatever protocol the units recorded.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np


def mean_canonical_correlation(a: np.ndarray, b: np.ndarray) -> float:
    """The mean of the min(k_A, k_B) canonical correlations of the columns of A and B (n x k each), from
    orthonormal bases of the centred columns (QR) and the singular values of Q_A^T Q_B."""
    qa, _ = np.linalg.qr(a - a.mean(axis=0))
    qb, _ = np.linalg.qr(b - b.mean(axis=0))
    rho = np.linalg.svd(qa.T @ qb, compute_uv=False)
    return float(np.clip(rho, 0.0, 1.0)[: min(a.shape[1], b.shape[1])].mean())


@lru_cache(maxsize=256)
def svcca_null(n: int, k_a: int, k_b: int, draws: int = 5, seed: int = 0) -> float:
    """The expected SVCCA of independent data with `n` examples and k_A, k_B kept directions: the mean over
    `draws` draws of independent standard Gaussian n x k_A and n x k_B matrices (their spread is about 0.003
    at n = 1,000, k = 50). Gaussian reductions are what SVCCA sees (U_k S_k rescales columns, and CCA does
    not see a column's scale)."""
    if not (0 < k_a < n and 0 < k_b < n):
        raise ValueError(f"svcca_null: expected 0 < k_a, k_b < n (examples), found n={n}, k_a={k_a}, k_b={k_b}")
    rng = np.random.default_rng(seed)
    pairs = ((rng.standard_normal((n, k_a)), rng.standard_normal((n, k_b))) for _ in range(draws))
    return float(np.mean([mean_canonical_correlation(a, b) for a, b in pairs]))
