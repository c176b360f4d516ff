"""SVCCA (Raghu et al. 2017; Cianfarani et al. 2022 B.1), a measure of `similarity:` entries only: its catalogue
entry, its memory model (no work model of its own: priced as the generic covariance form), its math and its
registration."""

from __future__ import annotations

from sweep.costs.memory import whole
from sweep.measures.indices.base import register_index
from sweep.store.catalogue import IndexEntry

ENTRY = IndexEntry(
    "svcca",
    ("svcca",),
    "svcca",
    "similarity",
    description="SVCCA (Raghu et al. 2017): mean canonical correlation of the 99%-variance SVD reductions",
    scopes=("similarity",),
)


def numbers(rows: int, pa: int, pb: int) -> int:
    """SVCCA: each side's thin SVD (3 copies), then CCA on at most min(rows, p) directions: never p x p."""
    return 3 * rows * (pa + pb) + whole(rows, min(rows, pa), min(rows, pb), 6)


def svcca(a, b, keep: float = 0.99, max_k: int | None = None) -> float:
    """SVCCA (Raghu et al. 2017): each centred representation reduced to its leading singular directions, the
    fewest that explain `keep` of its variance (99%, as Raghu et al.) and at most `max_k` (None: no cap), then
    the mean of the canonical correlations of the two reductions (min(k_A, k_B) of them)."""
    return svcca_k(a, b, keep, max_k)[0]


def svcca_k(a, b, keep: float = 0.99, max_k: int | None = None) -> tuple[float, int, int]:
    """SVCCA and the directions each side kept, (value, k_A, k_B): with n examples the mean canonical
    correlation of independent data grows with k/n (0.19 at k = 50, 0.33 at 150 for n = 1,000), so a value
    is read against the null at its own k and n."""
    from sweep.measures.cca import centred_cca
    from sweep.measures.matrices import centre, dtype_of, pair_f64

    ta, tb = dtype_of(a), dtype_of(b)
    a, b = pair_f64(a, b)
    ra, rb = _leading(centre(a), keep, max_k), _leading(centre(b), keep, max_k)
    rho, _ = centred_cca(ra, rb, ta, tb)
    return float(rho[: min(ra.shape[1], rb.shape[1])].mean()), ra.shape[1], rb.shape[1]


def svcca_columns(a, b, max_k: int | None = None) -> tuple[float, dict]:
    """SVCCA and the directions each side kept (`svcca_k_a`, `svcca_k_b`: its null depends on them): the
    similarity kind's pairwise measure `svcca`."""
    value, k_a, k_b = svcca_k(a, b, max_k=max_k)
    return value, {"svcca_k_a": k_a, "svcca_k_b": k_b}


def _leading(a, keep: float, max_k: int | None = None):
    """U_k S_k: the centred A's projection on its k leading singular directions, k the fewest whose squared
    singular values reach `keep` of the total, at most `max_k`."""
    import torch

    u, s, _ = torch.linalg.svd(a, full_matrices=False)
    power = s.square()
    if not len(s) or power.sum() == 0:
        raise ValueError("a representation is constant over the examples (zero after centring)")
    k = min(len(s), int((torch.cumsum(power, 0) / power.sum() < keep).sum()) + 1)
    if max_k is not None:
        k = min(k, max_k)
    return u[:, :k] * s[:k]


# the unit's protocol: each side keeps at most svcca_max_k directions
INDEX = register_index(ENTRY, svcca_columns, "flatten", numbers=numbers, options={"svcca_max_k": "max_k"})
