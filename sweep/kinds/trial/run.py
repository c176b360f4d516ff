"""One stitching trial, pure PyTorch (no Ray): donors -> split -> fit the stitcher -> evaluate -> one row.

`record_trial` (the kind's `run_unit`; `run_trial` in a bare process) is idempotent: if the trial's Parquet
part exists it returns at once. Any exception (or a non-finite loss) becomes a row with status "failed" and
the reason (`sweep.kinds.base.record_rows`), so a sweep always goes on.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from sweep.config.donors import DonorEval
from sweep.config.trial import TrialSpec
from sweep.data.core import Splits
from sweep.kinds.base import RunContext, record_rows
from sweep.kinds.trial.measures import ood_auroc, similarities
from sweep.measures.indices import Network
from sweep.models.base import split
from sweep.registry import INDICES
from sweep.stitching.noise import noise_seed, noise_splits
from sweep.stitching.objectives import OBJECTIVES, FitContext, eval_mode
from sweep.stitching.stitcher import StitchedNet, Stitcher
from sweep.store.layout import CURVES_DIR, TRIALS_DIR
from sweep.store.results import SweepDir, load_torch, save_torch, write_rows
from sweep.store.schema import column_names, schema, trial_schema
from sweep.train.evaluate import accuracy, agreement, most_frequent_class, predict, robust_accuracy
from sweep.worker.activations import Frozen
from sweep.worker.cache import worker_cache
from sweep.worker.splits import worker_splits
from sweep.worker.zoo import donor_row, load_donor, predictions_loc

Report = Callable[[dict], None]


def pick_device(want_gpu: bool = True) -> torch.device:
    return torch.device("cuda" if want_gpu and torch.cuda.is_available() else "cpu")


def donor_accuracies(
    sweep: SweepDir, ref: str, donor_key: str, ev: DonorEval | None, eval_id: str | None
) -> tuple[float | None, float | None]:
    """The donor's (clean, robust) accuracy from the sweep's donors table: the row of exactly `ev` (this
    trial's test images and evaluation settings, or the donor's own test set in cross-task stitching), whose
    id (`eval_id`) the trial carries from the plan."""
    row = donor_row(sweep, ref.partition(":")[2], eval_id, donor_key, ev) if ev is not None else None
    return (row["clean_acc"], row["robust_acc"]) if row else (None, None)


# TrialSpec fields that are not columns of the trials table: the donors-table rows a trial reads and their ids
# (recorded as the donors' accuracies instead). `attacks` and the tuple fields are written "+"-joined below.
NOT_COLUMNS = {"front_eval", "end_eval", "front_eval_id", "end_eval_id", "attacks"}


def config_row(spec: TrialSpec, sweep_name: str) -> dict:
    """The configuration columns of a trial's row: every TrialSpec field (a field with no schema column is
    an error here, not a silently dropped setting)."""
    # shallow: the only nested dataclasses (the donors' evaluations) are not columns
    fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec) if f.name not in NOT_COLUMNS}
    missing = sorted(set(fields) - set(column_names(TRIALS_DIR)))
    if missing:
        raise KeyError(f"TrialSpec fields without a column in the trials schema: {missing}")
    row = dict(
        fields,
        trial_id=spec.trial_id,
        sweep=sweep_name,
        attack="+".join(spec.attacks),
        indices="+".join(spec.indices) or None,
        ood_outliers="+".join(spec.ood_outliers) or None,
        params=json.dumps(dict(spec.params), sort_keys=True) if spec.params else None,
    )
    return row


@dataclass
class _Trial:
    """One trial as it runs: its spec, where and how it runs (`RunContext`: the sweep's folder, the device, the
    data, the progress callback) and when it began (its setup time counts from there)."""

    spec: TrialSpec
    ctx: RunContext
    t0: float = field(default_factory=time.perf_counter)


def run_unit(spec: TrialSpec, ctx: RunContext) -> dict:
    """One trial as the backends run it (`Kind.run`): its row written (`record_trial`), its metrics reported."""
    row = record_trial(spec, ctx)
    return {k: row.get(k) for k in ("status", "clean_acc", "robust_acc", "error")}


def run_trial(
    spec: TrialSpec,
    sweep: SweepDir,
    report: Report | None = None,
    device: torch.device | None = None,
    data_root: str | None = None,
    download: bool = True,
) -> dict:
    """Run one stitching trial in this process (no backend: tests, benchmarks) and write its row (and curves):
    `record_trial` in the `RunContext` of these. Returns the row."""
    more = {"report": report} if report is not None else {}
    return record_trial(spec, RunContext(sweep, device or pick_device(), data_root, download, **more))


def record_trial(spec: TrialSpec, ctx: RunContext) -> dict:
    """Run one stitching trial and write its row (and its curves, before it: `record_rows`). Returns the row,
    or {"status": "skipped"} when the trial's part exists."""
    part = ctx.sweep_dir.trial_part(spec.trial_id)
    if part.exists():
        return {"trial_id": spec.trial_id, "status": "skipped"}
    base = dict(
        config_row(spec, ctx.sweep_dir.name),
        device=str(ctx.device),
        hostname=socket.gethostname(),
        torch_version=torch.__version__,
    )
    return record_rows(part, TRIALS_DIR, base, lambda: [_measure(_Trial(spec, ctx))], timing="time_total_s")[0]


def _splits(spec: TrialSpec, ctx: RunContext) -> Splits:
    """The trial's data on its device, as the worker keeps it."""
    where = {"root": ctx.data_root, "download": ctx.download}
    return worker_splits(spec.dataset, spec.train_size, spec.val_size, spec.test_size, ctx.device, **where)


def _measure(trial: _Trial) -> dict:
    """The trial's metrics (the columns of its row past its configuration); its curves written on the way."""
    spec, ctx = trial.spec, trial.ctx
    splits = _splits(spec, ctx)
    metrics, curves = _stitch_and_evaluate(trial, splits)
    unknown = sorted(set(metrics) - set(trial_schema().names))
    if unknown:
        raise KeyError(f"metrics without a column in the trials schema: {unknown}")
    if curves:
        write_rows(
            ctx.sweep_dir.curve_part(spec.trial_id),
            [{"trial_id": spec.trial_id, "epoch": e, "metric": m, "value": v} for e, m, v in curves],
            schema(CURVES_DIR),
        )
    return metrics


@dataclass
class _Parts:
    """The pieces of a stitched network: both donors, f<=i, g<=j and g>j, and a fresh stitcher. A noise
    sender has no model: its front is the identity on its samples. `front_acts` / `end_acts`: f<=i and g<=j
    with their activations on the splits (cached in the worker when the cache is on)."""

    front_model: torch.nn.Module | None
    end_model: torch.nn.Module
    front: torch.nn.Module
    end_front: torch.nn.Module
    end: torch.nn.Module
    stitcher: Stitcher
    front_acts: Frozen | None = None
    end_acts: Frozen | None = None


def shares_donors(spec: TrialSpec) -> bool:
    """Whether the trial's fit leaves both donors as loaded (its objective says so, tested for every shipped
    one; no BatchNorm statistics moved; no layout change), so it may run on the worker's cached donors."""
    return OBJECTIVES[spec.objective].leaves_donors and spec.donor_bn != "update" and not spec.channels_last


def assemble(spec: TrialSpec, splits: Splits, sweep: SweepDir, device: torch.device, shared: bool = False) -> _Parts:
    """The trial's parts; `shared`: on the worker's cached donors (`shares_donors`), else on copies."""
    end_model = load_donor(sweep, spec.end_key, device, shared=shared)
    end_front, end = split(end_model, spec.end_point)
    if spec.noise_sigma is None:
        front_model = load_donor(sweep, spec.front_key, device, shared=shared)
        front, _ = split(front_model, spec.front_point)
    else:
        front_model, front = None, torch.nn.Identity()
    with torch.no_grad():
        probe = splits.train_x[:2].to(device)
        target = end_front(probe).shape
        source = front(probe).shape if front_model is not None else target
    torch.manual_seed(spec.seed)
    stitcher = Stitcher.for_shapes(source, target, spec.init or "random", spec.stitcher).to(device)
    if spec.channels_last:
        for m in (front_model, end_model, stitcher):
            m.to(memory_format=torch.channels_last)
    return _Parts(front_model, end_model, front, end_front, end, stitcher)


def _frozen(spec: TrialSpec, p: _Parts, splits: Splits, device: torch.device) -> None:
    """The frozen halves of `p` on `splits`, named for the worker's cache by checkpoint and point (a noise
    sender's halves on its samples are not cached: they are drawn per trial)."""
    noise = spec.noise_sigma is not None  # the checkpoints the donors were read from, and the points
    front_id = None if noise else (*p.front_model.checkpoint_identity, spec.front_point)
    end_id = None if noise else (*p.end_model.checkpoint_identity, spec.end_point)
    p.front_acts = Frozen(p.front, front_id, splits, device, spec.channels_last)
    p.end_acts = Frozen(p.end_front, end_id, splits, device, spec.channels_last)


def _stitch_and_evaluate(trial: _Trial, splits: Splits) -> tuple[dict, list[tuple[int, str, float]]]:
    """The trial's metrics, and the learning curves its fit recorded (epoch, metric, value)."""
    spec, sweep, device, report = trial.spec, trial.ctx.sweep_dir, trial.ctx.device, trial.ctx.report
    p = assemble(spec, splits, sweep, device, shared=shares_donors(spec))
    images = splits  # the data's images: what the receiver's own front sees
    if spec.noise_sigma is not None:  # the stitcher trains and is tested on the noise sender's samples
        splits = _noise(spec, p, images, device)
    _frozen(spec, p, splits, device)
    out: dict = {"split_id": splits.split_id}
    out["train_size"], out["val_size"], out["test_size"] = (len(splits.train_y), len(splits.val_y), len(splits.test_y))
    # Everything that describes the donors is measured before the fit: with `donor_bn: update` the fit moves
    # their BatchNorm statistics, and the indices and the reference accuracy are about the donors as trained.
    donors, ref_acc, body_head = _reference_accuracies(spec, sweep, p.front_model, p.end_model, images, device)
    out.update(donors)
    if any(not INDICES[name].after_fit for name in spec.indices):  # the after-fit ones are measured below
        t_sim = time.perf_counter()
        out.update(similarities(spec, p.front_acts, p.end_acts, p.stitcher))
        out["time_similarity_s"] = time.perf_counter() - t_sim
    fit = FitContext(p.front, p.end, p.stitcher, splits, spec, device, p.end_front, report=report)
    fit.front_acts, fit.end_acts, fit.end_model = p.front_acts, p.end_acts, p.end_model
    t1 = time.perf_counter()
    out["time_setup_s"] = t1 - trial.t0 - out.get("time_similarity_s", 0.0)
    out.update(OBJECTIVES[spec.objective].fit(fit))
    save_stitcher(sweep, spec, p)
    out["time_fit_s"] = time.perf_counter() - t1
    report({"phase": "fit_done", "time_fit_s": out["time_fit_s"]})
    if not fit.front_is_frozen:  # the fit moved the front's BatchNorm statistics: its cached activations are stale
        p.front_acts = dataclasses.replace(p.front_acts, identity=None)
    t2 = time.perf_counter()  # the front's pass over the test images is part of the clean evaluation
    sent = p.front_acts.on("test", precision=spec.precision) if p.front_acts.fits("test", spec.precision) else None
    stitched = StitchedNet(p.front, p.stitcher, p.end).eval()
    out.update(_evaluate(spec, stitched, splits, device, ref_acc, sent, body_head, t2))
    t4 = time.perf_counter()
    after_fit = [INDICES[name] for name in spec.indices if INDICES[name].after_fit]
    if after_fit:  # indices of the stitched network, after the fit
        n = spec.similarity_samples
        net = Network(
            lambda b: p.stitcher(p.front(b)), p.end_front, p.end, splits.test_x[:n], device, images.test_x[:n]
        )
        with eval_mode(p.front, p.stitcher, p.end_front):
            for index in after_fit:
                out.update(index.after_fit(net))
    if spec.ood_outliers:
        out["ood_auroc"] = ood_auroc(spec, trial.ctx, p.front_acts, p.end_acts, p.stitcher, splits)
        out["time_ood_s"] = time.perf_counter() - t4
    return out, fit.curves


def save_stitcher(sweep: SweepDir, spec: TrialSpec, p: _Parts) -> None:
    """The fitted stitcher, and with `donor_bn: update` the donors' BatchNorm statistics the fit moved (f<=i,
    g>j), written before the trial's part: later units rebuild the stitched network from it."""
    moved = spec.donor_bn == "update"

    def buffers(half):
        return {k: v.detach().cpu() for k, v in half.named_buffers()} if moved and half is not None else None

    state = {k: v.detach().cpu() for k, v in p.stitcher.state_dict().items()}
    front = p.front if p.front_model is not None else None
    save_torch(sweep.stitcher(spec.trial_id), {"stitcher": state, "front": buffers(front), "end": buffers(p.end)})


def refit(spec: TrialSpec, ctx: RunContext) -> _Parts:
    """Fit a trial's stitcher again from its spec (no evaluation, no row), and keep it: for a trial recorded
    before stitchers were kept. The parts come back with the fitted stitcher."""
    splits = _splits(spec, ctx)
    p = assemble(spec, splits, ctx.sweep_dir, ctx.device)
    _frozen(spec, p, splits, ctx.device)
    fit = FitContext(p.front, p.end, p.stitcher, splits, spec, ctx.device, p.end_front)
    fit.front_acts, fit.end_acts, fit.end_model = p.front_acts, p.end_acts, p.end_model
    OBJECTIVES[spec.objective].fit(fit)
    save_stitcher(ctx.sweep_dir, spec, p)
    return p


def noise_draw_seed(spec: TrialSpec) -> int:
    """The seed a noise trial's samples are drawn from: the sender's own (`noise: {seed: N}`), else the trial's,
    with the receiver and the point (the paper regenerates the noise at every stitch point)."""
    return noise_seed(spec.seed if spec.noise_seed is None else spec.noise_seed, spec.end_key, spec.end_point)


def _noise(spec: TrialSpec, p: _Parts, images: Splits, device: torch.device) -> Splits:
    """The noise sender's samples for this trial: shaped like the receiver's activation at the point, drawn
    per batch as they are read unless a part fits the worker's memory budget (the same samples either way)."""
    with torch.no_grad():
        shape = tuple(p.end_front(images.train_x[:1].to(device)).shape[1:])
    return noise_splits(
        shape,
        images.num_classes,
        spec.noise_sigma,
        spec.noise_train_per_class,
        spec.noise_test_per_class,
        spec.val_size,
        noise_draw_seed(spec),
        keep_bytes=worker_cache().settings.budget,
    ).to(device)


def _evaluate(
    spec: TrialSpec,
    stitched: StitchedNet,
    splits: Splits,
    device: torch.device,
    ref_acc,
    sent=None,
    body_head=None,
    t2: float | None = None,
) -> dict:
    """Clean accuracy (and what the stitched network predicts most), relative and robust accuracy, agreement
    with the end network (`body_head`: the donors' own test predictions). `sent`: the front's cached
    activations of the test images (the clean pass then starts after the front); `t2`: when the clean
    evaluation began (before `sent` was read or computed)."""
    t2 = time.perf_counter() if t2 is None else t2
    net, x = (lambda a: stitched.end(stitched.stitcher(a)), sent) if sent is not None else (stitched, splits.test_x)
    pred = predict(net, x, device, precision=spec.precision, channels_last=spec.channels_last)
    out = {"clean_acc": accuracy(pred, splits.test_y), "num_classes": splits.num_classes}
    if body_head is not None:
        out.update(agreement(pred, *body_head, splits.test_y))
    out["most_frequent_class"], out["most_frequent_class_ratio"] = most_frequent_class(pred, splits.num_classes)
    out["relative_acc"] = out["clean_acc"] / ref_acc if ref_acc else None
    t3 = time.perf_counter()
    out["time_eval_clean_s"] = t3 - t2
    out["robust_acc"] = robust_accuracy(
        stitched,
        splits.test_x,
        splits.test_y,
        n_eval=spec.n_eval_robust,
        eps=spec.eps,
        attacks=spec.attacks,
        iterations=spec.attack_iterations,
        restarts=spec.attack_restarts,
        seed=spec.seed,
        device=device,
    )
    out["time_eval_robust_s"] = time.perf_counter() - t3
    return out


def _reference_accuracies(
    spec: TrialSpec, sweep: SweepDir, front_model, end_model, splits: Splits, device: torch.device
) -> tuple[dict, float | None, tuple | None]:
    """The donors' accuracies (from the donors table: columns of the row), the reference accuracy that
    `relative_acc` divides by: the end model's on this trial's images, or, in cross-task stitching on the
    front's data, the front model's (the donor trained on the data the stitched network is tested on), and the
    donors' own test predictions, as trained, that agreement compares against (None: a noise sender)."""
    front_acc, front_rob = donor_accuracies(sweep, spec.front, spec.front_key, spec.front_eval, spec.front_eval_id)
    end_acc, end_rob = donor_accuracies(sweep, spec.end, spec.end_key, spec.end_eval, spec.end_eval_id)
    if spec.end_dataset in ("", spec.dataset):
        ref_model, ref_acc = end_model, end_acc
    elif front_model is None:  # a noise sender: the receiver on this data's images
        ref_model, ref_acc = end_model, None
    elif spec.front_dataset == spec.dataset:
        ref_model, ref_acc = front_model, front_acc
    else:  # neither donor trained on this data: the end model's accuracy on it
        ref_model, ref_acc = end_model, None
    if ref_acc is None:  # no donors row for these images and settings: measure it here
        ref_acc = accuracy(predict(ref_model, splits.test_x, device), splits.test_y)
    out = dict(front_clean_acc=front_acc, front_robust_acc=front_rob, end_clean_acc=end_acc, end_robust_acc=end_rob)
    body_head = None
    if front_model is not None:
        pairs = (((spec.front_key, spec.dataset), front_model), ((spec.end_key, spec.dataset), end_model))
        body_head = tuple(_predictions(sweep, key, m, splits, device) for key, m in pairs)
    if "receiver_rank" in spec.indices:  # Smith & Marcu's baseline: the receiver on these very images
        out["receiver_acc"] = (
            ref_acc
            if ref_model is end_model and ref_acc is not None
            else accuracy(predict(end_model, splits.test_x, device), splits.test_y)
        )
    return out, ref_acc, body_head


def _predictions(sweep: SweepDir, key: tuple[str, str], model, splits: Splits, device: torch.device) -> torch.Tensor:
    """A donor's predictions on the test images: kept in the zoo by the donor stage (`predictions_loc`), else
    computed here from the worker's cache (its logits, keyed like activations). `key`: (donor key, dataset)."""
    loc = predictions_loc(sweep, *key, len(splits.test_y))
    try:
        kept = load_torch(loc)
    except Exception:  # none kept (an older sweep, a donor stage that did not know): compute them
        kept = None
    if kept is not None and len(kept) == len(splits.test_y):
        return kept.to(splits.test_y.device)
    return Frozen(model, (*model.checkpoint_identity, "logits"), splits, device).on("test").argmax(1)
