"""The indices' work models (each index's `count`, on `sweep.costs.work`'s primitives) against the operations
the indices really run: every matrix product and decomposition that PyTorch dispatches while an index computes,
counted from its operands' shapes, on each path an index takes (wide, tall, and in between)."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from sweep.costs.memory import ROW_CHUNK, ShapePair
from sweep.costs.work import Work, direct_match_work, index_work, pair_work
from sweep.measures.indices import Pair
from sweep.measures.indices.cka import linear_cka
from sweep.measures.indices.dm import _dm_score, dm_work
from sweep.measures.indices.opd import opd
from sweep.measures.indices.pwcca import pwcca
from sweep.measures.indices.rank import numerical_rank


class Ops(TorchDispatchMode):
    """Multiply-adds of matrix products, and m p^2 of every eigendecomposition and SVD (with or without
    vectors: under a dispatch mode `svdvals` computes its vectors too, so the two are counted together). A
    pseudo-inverse reaches the mode as one operation: its SVD and its product are counted from its shape."""

    def __init__(self) -> None:
        super().__init__()
        self.mac = self.decomp = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name == "mm":
            self.mac += args[0].shape[0] * args[0].shape[1] * args[1].shape[1]
        elif name == "addmm":
            self.mac += args[1].shape[0] * args[1].shape[1] * args[2].shape[1]
        elif name == "bmm":
            self.mac += args[0].shape[0] * args[0].shape[1] * args[0].shape[2] * args[1].shape[2]
        elif name in ("_linalg_eigh", "_linalg_svd", "linalg_pinv"):
            m, p = args[0].shape[-2:]
            self.decomp += max(m, p) * min(m, p) ** 2
            if name == "linalg_pinv":  # one kernel: its SVD, then V S^-1 U^T
                self.mac += max(m, p) * min(m, p) ** 2
        return func(*args, **(kwargs or {}))


def counted(fn, *args) -> Ops:
    with Ops() as ops:
        fn(*args)
    return ops


def close(model: float, real: float, rel: float = 0.1) -> bool:
    return abs(model - real) <= rel * max(real, 1.0)


WIDE, BETWEEN, TALL = (200, 1000, 600), (500, 40, 30), (ROW_CHUNK + 4464, 12, 20)


@pytest.mark.parametrize(
    "name,fn,shape",
    [
        ("cka", linear_cka, WIDE),
        ("cka", linear_cka, BETWEEN),
        ("cka", linear_cka, TALL),
        ("opd", opd, WIDE),
        ("opd", opd, BETWEEN),
        ("opd", opd, TALL),
        ("pwcca", pwcca, BETWEEN),  # PWCCA on a wide pair is degenerate (every correlation 1); not a path used
        ("pwcca", pwcca, TALL),
    ],
)
def test_an_index_work_counts_the_products_and_decompositions_it_runs(name, fn, shape):
    rows, pa, pb = shape
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(rows, pa, generator=gen), torch.randn(rows, pb, generator=gen)
    ops, work = counted(fn, a, b), index_work(name, rows, pa, pb)
    assert ops.mac > 0 and close(work.mac, ops.mac), (work.mac, ops.mac)
    assert close(work.decomp + work.values, ops.decomp), (work.decomp + work.values, ops.decomp)
    assert work.calls == 1


@pytest.mark.parametrize("rows,p", [(200, 1000), (500, 40), (ROW_CHUNK + 4464, 12)])
def test_the_rank_work_counts_one_side(rows, p):
    a = torch.randn(rows, p, generator=torch.Generator().manual_seed(1))
    ops, work = counted(numerical_rank, a), index_work("rank", rows, p, p)
    assert close(work.mac, ops.mac) and close(work.values + work.decomp, ops.decomp)


@pytest.mark.parametrize("sender", [(8, 8, 8), (8, 4, 4)])
def test_the_dm_work_counts_its_fit_and_its_test_pass(sender):
    """The DM distance on per-position rows, with and without the sender resized to the target's positions."""
    target = (6, 4, 4)
    n, k = 50, 20
    gen = torch.Generator().manual_seed(2)
    a, b = torch.randn(n, *sender, generator=gen), torch.randn(n, *target, generator=gen)
    fa, fb = torch.randn(k, *sender, generator=gen), torch.randn(k, *target, generator=gen)
    resize = (lambda x: torch.nn.functional.interpolate(x, size=target[1:])) if sender[1:] != target[1:] else None
    pair = Pair(a, b, resize=resize or (lambda x: x), fit=lambda: (fa, fb))
    ops, work = counted(_dm_score, pair, "positions"), dm_work(ShapePair(sender, target, {}), n, k)
    assert close(work.mac, ops.mac, 0.25) and close(work.decomp, ops.decomp), (work, ops.mac, ops.decomp)
    unresized = dm_work(ShapePair((sender[0], *target[1:]), target, {}), n, k)  # the same channels at its size
    assert (work.elem > unresized.elem) == (resize is not None)


def test_a_pair_sums_its_indices_and_repeats_a_null_per_permutation():
    pair = ShapePair((8, 4, 4), (8, 4, 4), {})
    cka = pair_work(pair, ("cka",), 100, 0)
    both = pair_work(pair, ("cka", "rank"), 100, 0)
    rank = index_work("rank", 100 * 16, 8, 8)  # per-position rows, each side
    assert both.mac == pytest.approx(cka.mac + 2 * rank.mac)
    # a permutation null recomputes the similarity, not the rank (a property of one side)
    nulls = pair_work(pair, ("cka", "rank"), 100, 0, permutations=9)
    assert nulls.mac == pytest.approx(10 * cka.mac + 2 * rank.mac)
    # an index with no work model (measured after the fit) adds nothing
    assert pair_work(pair, ("receiver_rank",), 100, 0) == Work()


def test_work_is_priced_at_the_profile_rates():
    rates = {"mac_s": 1e-9, "decomp_s": 1e-8, "values_s": 1e-7, "elem_s": 1e-6, "calls_s": 1e-3}
    assert Work(mac=2, decomp=3, values=4, elem=5, calls=1).seconds(rates) == pytest.approx(
        2e-9 + 3e-8 + 4e-7 + 5e-6 + 1e-3
    )


def test_the_direct_match_work_counts_its_normal_equations():
    """Direct matching's fit as `direct_match` runs it on per-position rows: the normal equations accumulated,
    solved, and the residual's second pass (one product per row chunk)."""
    from sweep.measures.least_squares import NormalEquations

    sender, target, k = (10, 4, 4), (6, 4, 4), 40
    gen = torch.Generator().manual_seed(3)
    a, b = torch.randn(k * 16, 10, generator=gen), torch.randn(k * 16, 6, generator=gen)

    def fit():
        sums = NormalEquations()
        sums.update(a, b)
        solution = sums.solve()
        return ((a.double() @ solution.weight + solution.bias - b.double()) ** 2).sum()

    ops, work = counted(fit), direct_match_work(ShapePair(sender, target, {}), k)
    assert close(work.mac, ops.mac, 0.25) and close(work.decomp, ops.decomp), (work, ops.mac, ops.decomp)
