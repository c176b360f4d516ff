"""The matrices the similarity indices read: input checks, and the sums they need accumulated over chunks
(of rows for tall matrices, of features for wide ones), so a large activation matrix is never copied to
float64 whole. `ROWS` (rows per chunk) is read at call time."""

from __future__ import annotations

import numpy as np
import torch


def as_2d(a, name: str) -> torch.Tensor:
    """`a` as a 2-D tensor in its own dtype, not copied (the whole-matrix float64 copy is what the streamed
    forms avoid); finiteness is checked chunk by chunk where it is read."""
    t = torch.as_tensor(np.asarray(a) if not isinstance(a, torch.Tensor) else a).detach()
    if t.dim() != 2:
        raise ValueError(
            f"{name}: expected a 2-D (examples x neurons) array, found shape {tuple(t.shape)};"
            " use to_2d() on activation tensors first"
        )
    if t.shape[0] == 0 or t.shape[1] == 0:
        raise ValueError(f"{name}: empty representation of shape {tuple(t.shape)}")
    return t


def as_f64(a, name: str) -> torch.Tensor:
    """`as_2d` copied to float64 whole, checked finite: for the forms that factor the whole matrix."""
    t = as_2d(a, name).to(torch.float64)
    if not torch.isfinite(t).all():
        raise ValueError(f"{name}: representation holds NaN or infinite values")
    return t


def pair_2d(a, b) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = as_2d(a, "A"), as_2d(b, "B")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"A and B must hold the same examples: {a.shape[0]} rows vs {b.shape[0]}")
    return a, b


def pair_f64(a, b) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = pair_2d(a, b)
    return as_f64(a, "A"), as_f64(b, "B").to(a.device)


def finite(part: torch.Tensor) -> torch.Tensor:
    if not torch.isfinite(part).all():
        raise ValueError("a representation holds NaN or infinite values")
    return part


ROWS = 65536  # rows per chunk of the streamed forms (64 channels: 32 MiB of float64)


def row_chunks(a: torch.Tensor):
    """A's rows in float64 chunks of `ROWS` (checked finite): the streamed forms never hold A in float64 whole."""
    for start in range(0, a.shape[0], ROWS):
        yield finite(a[start : start + ROWS].to(torch.float64))


def column_means(a: torch.Tensor) -> torch.Tensor:
    return sum(part.sum(0) for part in row_chunks(a)) / a.shape[0]


def centred_covariance(a) -> torch.Tensor:
    """A_c^T A_c (p x p, float64) of the column-centred A, accumulated over chunks of rows: for a tall A (many
    rows, few columns: the `positions` layout) in memory that does not grow with the rows."""
    a = as_2d(a, "A")
    mean = column_means(a)
    cov = torch.zeros(a.shape[1], a.shape[1], dtype=torch.float64, device=a.device)
    for part in row_chunks(a):
        part = part - mean
        cov += part.T @ part
    return cov


def centred_second_moment(a: torch.Tensor) -> torch.Tensor:
    """The smaller of A_c A_c^T (n x n, chunks of columns) and A_c^T A_c (p x p, chunks of rows): the two
    share their nonzero eigenvalues, the squared singular values of the centred A."""
    return centred_gram(a) if a.shape[0] <= a.shape[1] else centred_covariance(a)


def centre(a: torch.Tensor) -> torch.Tensor:
    return a - a.mean(dim=0, keepdim=True)


def unit(a: torch.Tensor) -> torch.Tensor:
    norm = torch.linalg.matrix_norm(a)
    if norm == 0:
        raise ValueError("a representation is constant over the examples (zero after centring)")
    return a / norm


def centred_gram(a, chunk: int = 16384) -> torch.Tensor:
    """The n x n Gram matrix of A's features centred over the batch, in float64, accumulated over chunks of at
    most `chunk` features (so a wide layer is never held in float64 whole). Centring changes no unbiased
    HSIC (the estimator is invariant to shifting the features) but removes the cancellation that large feature
    means cause."""
    a = torch.as_tensor(a)
    a = a.reshape(a.shape[0], -1)
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"empty representation of shape {tuple(a.shape)}")
    gram = torch.zeros(a.shape[0], a.shape[0], dtype=torch.float64, device=a.device)
    for start in range(0, a.shape[1], chunk):
        part = a[:, start : start + chunk].to(torch.float64)
        if not torch.isfinite(part).all():
            raise ValueError("a representation holds NaN or infinite values")
        part = part - part.mean(dim=0, keepdim=True)
        gram += part @ part.T
    return gram


def covariances(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A_c^T A_c, B_c^T B_c and A_c^T B_c (float64) of the column-centred A and B, over chunks of rows."""
    mean_a, mean_b = column_means(a), column_means(b).to(a.device)
    pa, pb = a.shape[1], b.shape[1]
    saa, sbb, sab = (torch.zeros(r, c, dtype=torch.float64, device=a.device) for r, c in ((pa, pa), (pb, pb), (pa, pb)))
    for start in range(0, a.shape[0], ROWS):
        part_a = finite(a[start : start + ROWS].to(torch.float64)) - mean_a
        part_b = finite(b[start : start + ROWS].to(device=a.device, dtype=torch.float64)) - mean_b
        saa += part_a.T @ part_a
        sbb += part_b.T @ part_b
        sab += part_a.T @ part_b
    return saa, sbb, sab


def dtype_of(a) -> torch.dtype:
    return a.dtype if isinstance(a, torch.Tensor) else torch.as_tensor(np.asarray(a)).dtype
