"""One representation-test unit (Balogh & Jelasity 2025 Section 5, Ding et al.'s framework), pure PyTorch, idempotent.

For every member B of the unit's set S: the linear probing accuracy F(B) (sweep/probing.py); sensitivity
members are channel-space low-rank approximations (LowRank). The reference
A = argmax F (Eq. 9; ties: the first member, i.e. full rank). Then for every B the dissimilarities d(A, B):
1 - CKA, 1 - PWCCA, OPD, the structural DM distance (the DM map from B to A fitted on K training images, its
squared relative error on the test sample, as in stitching trials), and, with `dm_functional`, 1 - the
relative accuracy of the network stitched from B into A's network by direct matching (low-rank sources stay
low-rank while stitched, as Balogh & Jelasity 2025 5.1 describes), relative to A's own network (A's front,
low-rank where A is, and A's end), so that d(A, A) = 0. One Parquet part per unit, one row per member.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import torch
from torch import nn

from sweep.kinds.base import RunContext, record_unit, unit_columns
from sweep.kinds.reptest.spec import RepTestSpec
from sweep.kinds.reptest.table import TABLE
from sweep.measures.indices import Pair
from sweep.measures.probing import linear_probe_accuracy
from sweep.models.base import split
from sweep.registry import INDICES
from sweep.stitching.objectives import FitContext, direct_match
from sweep.stitching.stitcher import StitchedNet, Stitcher
from sweep.store.results import SweepDir
from sweep.train.evaluate import accuracy, activations, predict
from sweep.worker.splits import worker_splits
from sweep.worker.zoo import load_donor

CPU = torch.device("cpu")  # the unit moves the images it uses; the worker keeps them on the host


class LowRank(nn.Module):
    """The low-rank approximation of Balogh & Jelasity 2025's sensitivity test, in the channel space: every position's
    channel vector (rows of (N*H*W, C), or (N*T, D) for tokens, as the reference code reshapes) is projected
    onto the top-`rank` principal directions of a training sample (centred SVD) and the maps are reshaped
    back. Applied consistently to training, test and stitched inputs."""

    def __init__(self, train_acts: torch.Tensor, rank: int) -> None:
        super().__init__()
        rows = _channel_rows(train_acts, torch.float64)  # one float64 copy, centred in place
        mean = rows.mean(0, keepdim=True)
        _, _, vh = torch.linalg.svd(rows.sub_(mean), full_matrices=False)
        if rank > vh.shape[0]:
            raise ValueError(f"rank {rank} exceeds the {vh.shape[0]} channel directions the training sample spans")
        self.register_buffer("mean", mean.float())
        self.register_buffer("basis", vh[:rank].T.contiguous().float())  # (C, rank)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        rows = _channel_rows(a) - self.mean
        approx = (rows @ self.basis) @ self.basis.T + self.mean
        if a.dim() == 4:
            n, c, h, w = a.shape
            return approx.reshape(n, h, w, c).permute(0, 3, 1, 2).contiguous()
        return approx.reshape(a.shape)


def _channel_rows(a: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """(N, C, H, W) -> (N*H*W, C); (N, T, D) -> (N*T, D); (N, D) as it is. `dtype`: as a new tensor of that dtype,
    converted as it is laid out (one copy, not a reshaped copy and its conversion)."""
    if dtype is not None:
        laid = a.permute(0, 2, 3, 1) if a.dim() == 4 else a
        rows = torch.empty(laid.shape, dtype=dtype, device=a.device).copy_(laid)
        return rows.reshape(-1, rows.shape[-1])
    if a.dim() == 4:
        return a.permute(0, 2, 3, 1).reshape(-1, a.shape[1])
    return a.reshape(-1, a.shape[-1])


def run_reptest(
    spec: RepTestSpec,
    sweep: SweepDir,
    device: torch.device,
    data_root: str | None = None,
    download: bool = True,
    report=None,
) -> dict:
    part = sweep.part(TABLE, spec.unit_id)
    if part.exists():
        return {"unit_id": spec.unit_id, "status": "skipped"}
    report = report or (lambda m: None)
    base = base_row(spec, sweep.name)
    out = record_unit(part, TABLE, base, lambda: _run(spec, sweep, device, data_root, download, report))
    return {"unit_id": spec.unit_id, **out}


def base_row(spec: RepTestSpec, sweep_name: str) -> dict:
    """The columns every row of the unit's part shares: its settings, before what it measures."""
    return unit_columns(
        spec,
        sweep_name,
        test=spec.test,
        arch=spec.arch,
        dataset=spec.dataset,
        samples=spec.samples,
        probe_train_size=spec.probe_train_size,
    )


def _fronts(spec: RepTestSpec, models: dict, xtr: torch.Tensor, device: torch.device) -> dict[tuple, nn.Module]:
    """Each member B's front half, (donor key, layer, rank) -> module; low-rank when the member has a rank."""
    fronts: dict[tuple, nn.Module] = {}
    for _ref, key, layer, rank in spec.members:
        if (key, layer, None) not in fronts:
            fronts[(key, layer, None)] = split(models[key], layer)[0].eval()
        if rank is not None:
            base = fronts[(key, layer, None)]
            fronts[(key, layer, rank)] = nn.Sequential(base, LowRank(activations(base, xtr, device), rank)).eval()
    return fronts


def _run(spec: RepTestSpec, sweep: SweepDir, device: torch.device, data_root, download, report) -> list[dict]:
    splits = worker_splits(
        spec.dataset, spec.train_size, spec.val_size, spec.test_size, CPU, root=data_root, download=download
    )
    xtr, ytr = splits.train_x[: spec.probe_train_size], splits.train_y[: spec.probe_train_size]
    xte, yte = splits.test_x[: spec.samples], splits.test_y[: spec.samples].to(device)
    models = {key: load_donor(sweep, key, device) for _, key, _, _ in spec.members}
    fronts = _fronts(spec, models, xtr, device)
    members = [fronts[(key, layer, rank)] for _ref, key, layer, rank in spec.members]
    probe = {}
    for m, f in enumerate(members):
        probe[m] = linear_probe_accuracy(
            activations(f, xtr, device).flatten(1),
            ytr.to(device),
            activations(f, xte, device).flatten(1),
            yte,
            splits.num_classes,
            epochs=spec.probe_epochs,
            lr=spec.probe_lr,
            seed=spec.seed,
            device=device,
        )
        report({"phase": "probe", "member": m, "probe_acc": probe[m]})
    ref_m = max(probe, key=lambda m: (probe[m], -m))  # argmax F; ties go to the first member
    _, ref_key, ref_layer, ref_rank = spec.members[ref_m]
    ref_end = split(models[ref_key], ref_layer)[1].eval()
    reference = _Reference(
        front=members[ref_m],
        end=ref_end,
        # A's own network: its (low-rank, for a sensitivity member) front and its end. Relative accuracy is
        # relative to the target network (Balogh & Jelasity 2025 2.1), here the network with A's representation
        acc=accuracy(predict(nn.Sequential(members[ref_m], ref_end).eval(), xte, device), yte),
        a=activations(members[ref_m], xte, device).cpu(),
        a_fit=activations(members[ref_m], splits.train_x[: spec.dm_samples], device).cpu(),
    )
    rows = []
    for m, (ref, key, layer, rank) in enumerate(spec.members):
        row = dict(
            donor=ref,
            donor_key=key,
            layer=layer,
            rank=rank,
            probe_acc=probe[m],
            reference=m == ref_m,
            ref_donor=spec.members[ref_m][0],
            ref_layer=ref_layer,
            ref_rank=ref_rank,
            probe_gap=abs(probe[ref_m] - probe[m]),
        )
        rows.append(row | _dissimilarities(spec, members[m], reference, splits, xte, yte, device))
    return rows


@dataclass(frozen=True)
class _Reference:
    """A = argmax F: its front and end halves, its accuracy, its activations on the test and fit images."""

    front: nn.Module
    end: nn.Module
    acc: float
    a: torch.Tensor
    a_fit: torch.Tensor


def _dissimilarities(spec, f: nn.Module, ref: _Reference, splits, xte, yte, device: torch.device) -> dict:
    """d(A, B) of every requested index for the member whose front is `f` and, with `dm_functional`, 1 - the
    relative accuracy of B stitched into A's network by direct matching (the DM fits' K training images are
    the first `dm_samples`, as the dm objective's)."""
    b = activations(f, xte, device).cpu()
    xfit = splits.train_x[: spec.dm_samples]
    stitcher = Stitcher.for_shapes(torch.Size((1, *b.shape[1:])), torch.Size((1, *ref.a.shape[1:])))
    pair = Pair(b, ref.a, resize=stitcher.resize, fit=lambda: (activations(f, xfit, device).cpu(), ref.a_fit))
    row = {INDICES[name].entry.reptest_column: INDICES[name].dissimilarity(pair) for name in spec.indices}
    if spec.dm_functional:
        stitcher = stitcher.to(device)
        ctx = FitContext(
            front=f,
            end=ref.end,
            stitcher=stitcher,
            splits=splits,
            device=device,
            spec=SimpleNamespace(dm_samples=spec.dm_samples),
            end_front=ref.front,
        )
        direct_match(ctx)
        acc = accuracy(predict(StitchedNet(f, stitcher.eval(), ref.end).eval(), xte, device), yte)
        row["dm_func_acc"] = acc
        row["d_dm_func"] = 1.0 - (acc / ref.acc if ref.acc else 0.0)
    return row


def run_unit(spec: RepTestSpec, ctx: RunContext) -> dict:
    """One representation-test unit as the backends run it (`Kind.run`)."""
    out = run_reptest(spec, ctx.sweep_dir, ctx.device, ctx.data_root, ctx.download, ctx.report)
    return {"status": out["status"], "error": out.get("error")}
