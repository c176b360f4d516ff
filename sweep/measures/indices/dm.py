"""The structural direct-matching distance (Balogh & Jelasity 2025 Section 2.3): the least-squares affine map
from the sender's per-position rows to the target's, fitted on the K training images, and its squared relative
error on the test images. Its catalogue entry, its memory and work models, its math and its registration.
(Direct matching as a stitcher's fit is `sweep.stitching.objectives`; its work, `sweep.costs.work`.)"""

from __future__ import annotations

from sweep.config.shapes import channels, positions
from sweep.costs.memory import ALLOCATOR, F32, F64, ROW_CHUNK, copies, matrix
from sweep.costs.work import Work, mp2
from sweep.measures.indices.base import Pair, register_index, to_2d
from sweep.store.catalogue import IndexEntry

ENTRY = IndexEntry(
    "dm",
    ("sim_dm",),
    "dm distance",
    "distance",
    reptest_column="d_dm",
    reptest_label="dm (struct.)",
    description="the K-image direct-matching map's squared relative error on the test images",
)


def dm_numbers(fit_rows: int, test_rows: int, pa: int, pb: int) -> int:
    """The DM distance: the pseudo-inverse fit on K images' rows (4 copies of [A 1] and B), then the test
    rows in chunks."""
    return 4 * fit_rows * (pa + 1 + pb) + 3 * min(test_rows, ROW_CHUNK) * (pa + pb) + 2 * (pa + 1) * pb


def memory(pair, layout: str, n: int, k: int = 0) -> int:
    """The DM distance over the target's positions, the sender resized to them: its fit on k images, its test
    images by batches of about ROW_CHUNK rows (`dm_numbers`)."""
    rows, pb = matrix(pair.target, "positions", 1)
    batch = min(n, max(1, ROW_CHUNK // rows))
    resized = k + batch if positions(pair.sender) != rows else 0  # resized senders: the fit's, a batch's
    work = F64 * dm_numbers(k * rows, n * rows, channels(pair.sender), pb)
    work += F32 * resized * rows * channels(pair.sender)
    return int(ALLOCATOR * (work + copies("positions", (pair.target,), k + batch)))


def dm_work(pair, n: int, k: int) -> Work:
    """The DM distance (`_dm_score`): the pseudo-inverse fit on K images' per-position rows, then the test
    images' rows through the map, the sender resized to the target's positions when they differ."""
    rows = positions(pair.target)
    pa, pb = channels(pair.sender), channels(pair.target)
    fit_rows, test_rows = k * rows, n * rows
    # the pseudo-inverse: a thin SVD and V S^-1 U^T; then theta = pinv @ B
    fit = Work(decomp=mp2(fit_rows, pa + 1), mac=fit_rows * (pa + 1) ** 2 + fit_rows * (pa + 1) * pb)
    resized = 2 * (n + k) * rows * pa if positions(pair.sender) != rows else 0  # interpolation's reads and writes
    test = Work(mac=test_rows * pa * pb, elem=4 * test_rows * (pa + pb) + resized)
    return Work(calls=1) + fit + test


def work(pair, layout: str, n: int, k: int = 0) -> Work:
    """`dm_work` as an index's work model (its layout is always per-position rows)."""
    return dm_work(pair, n, k)


def dm_distance(a, b) -> float:
    """The structural direct-matching distance (Balogh & Jelasity 2025 Section 2.3): the normalised residual
    ||[A 1] theta - B||_F / ||B||_F of the least-squares affine map from A to B, solved by pseudo-inverse in
    float64. Rows are whatever the map acts on (for a 1x1-conv stitcher: `to_2d(x, "positions")`)."""
    import torch

    from sweep.measures.matrices import pair_f64

    a, b = pair_f64(a, b)
    if a.shape[0] < a.shape[1] + 1:
        raise ValueError(
            f"dm_distance: {a.shape[0]} rows for {a.shape[1] + 1} unknowns per output: the least"
            " squares fit is not determined; give more examples"
        )
    a1 = torch.cat([a, torch.ones(a.shape[0], 1, dtype=a.dtype, device=a.device)], dim=1)
    theta = torch.linalg.pinv(a1) @ b
    norm_b = torch.linalg.matrix_norm(b)
    if norm_b == 0:
        raise ValueError("dm_distance: the target representation is zero")
    return float(torch.linalg.matrix_norm(a1 @ theta - b) / norm_b)


def dm_fit(a, b):
    """The least-squares affine map [A 1] theta ~ B by pseudo-inverse in float64 (direct matching, Balogh & Jelasity
    2025
    Eq. 2-3); returns theta, (A's columns + 1) x B's columns."""
    import torch

    from sweep.measures.matrices import pair_f64

    a, b = pair_f64(a, b)
    if a.shape[0] < a.shape[1] + 1:
        raise ValueError(
            f"dm_fit: {a.shape[0]} rows for {a.shape[1] + 1} unknowns per output: the least"
            " squares fit is not determined; give more examples"
        )
    a1 = torch.cat([a, torch.ones(a.shape[0], 1, dtype=a.dtype, device=a.device)], dim=1)
    return torch.linalg.pinv(a1) @ b


def dm_error(theta, a, b) -> float:
    """The squared relative error ||[A 1] theta - B||_F^2 / ||B||_F^2 of a fitted DM map on (A, B): Balogh & Jelasity
    2025's structural DM distance when theta was fitted on other (training) images."""
    residual, norm_b = dm_sums(theta, a, b)
    if norm_b == 0:
        raise ValueError("dm_error: the target representation is zero")
    return residual / norm_b


def dm_sums(theta, a, b) -> tuple[float, float]:
    """(||[A 1] theta - B||_F^2, ||B||_F^2), in float64 over chunks of rows: the DM error's sums, which add up
    over batches of images."""
    import torch

    from sweep.measures import matrices
    from sweep.measures.matrices import finite, pair_2d

    a, b = pair_2d(a, b)
    theta = theta.to(device=a.device, dtype=torch.float64)
    weight, bias = theta[:-1], theta[-1]
    residual = norm_b = 0.0
    for start in range(0, a.shape[0], matrices.ROWS):  # rows in float64 chunks: memory does not grow with the rows
        part_a = finite(a[start : start + matrices.ROWS].to(torch.float64))
        part_b = finite(b[start : start + matrices.ROWS].to(device=a.device, dtype=torch.float64))
        residual += float(((part_a @ weight + bias - part_b) ** 2).sum())
        norm_b += float((part_b**2).sum())
    return residual, norm_b


def _dm_score(pair: Pair, layout: str) -> float:
    """The structural DM distance as the reference code computes it: the DM map fitted on the K training
    images, its squared relative error on the test images (the sender resized as the stitcher sees it), summed
    over batches of images so that the resized sender is never held whole (a layer4 sender resized to layer1's
    32 x 32 is 2 MB per image)."""
    from sweep.measures.matrices import ROWS

    fit_a, fit_b = pair.fit_pair()
    theta = dm_fit(to_2d(pair.resize(fit_a), layout), to_2d(fit_b, layout))
    step = max(1, ROWS // len(to_2d(pair.target[:1], layout)))  # images per batch: about ROWS rows
    residual = norm_b = 0.0
    for i in range(0, len(pair.target), step):
        sender, target = to_2d(pair.resize(pair.sender[i : i + step]), layout), to_2d(pair.target[i : i + step], layout)
        r, b = dm_sums(theta, sender, target)
        residual, norm_b = residual + r, norm_b + b
    if norm_b == 0:
        raise ValueError("dm_error: the target representation is zero")
    return residual / norm_b


# 2.3, out of sample: the map fitted on the pair's fit images (held with the rest)
INDEX = register_index(
    ENTRY, dm_distance, "positions", score=_dm_score, symmetric=False, fit_images=True, memory=memory, work=work
)
