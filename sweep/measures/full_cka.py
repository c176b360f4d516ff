"""How full-batch CKA goes through its images, which both the similarity kind (that runs it) and the memory
model (that sizes it) follow: the images per forward, and whether the float64 products are accumulated batch
by batch (`similarity.StreamedCKA`) instead of holding every activation. Imports no torch."""

from __future__ import annotations

F32, F64 = 4, 8  # bytes of a float32, a float64
CKA_BATCH = 250  # images per forward of full CKA (`sweep.kinds.similarity.run`)


def cka_streams(n: int, a: list[int], b: list[int]) -> bool:
    """Whether full CKA of n images between points of `a` and `b` features each is accumulated batch by batch
    (`StreamedCKA`): every point has no more features than there are images (the feature-space form is the
    smaller), and its float64 products take less than the float32 activations held would."""
    return max(a + b) <= n and F64 * streamed_products(a, b) < F32 * n * (sum(a) + sum(b))


def streamed_products(a: list[int], b: list[int]) -> int:
    """Numbers of `StreamedCKA`'s sums: each point's p x p second moment and every pair's p x q cross moment."""
    return sum(p * p for p in a + b) + sum(a) * sum(b)
