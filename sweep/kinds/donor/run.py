"""The donor zoo: donors the engine trains itself, cached by the hash of their training config, and `file:`
donors converted once into the same cache (keyed by the checkpoint's content).

Plain training follows Balogh & Jelasity 2023 A.2 (SGD, Nesterov momentum 0.9, weight decay 1e-4, learning rate divided
by 10 at 1/3 and 2/3 of the epochs, optional crop / flip / affine augmentation); adversarial training A.3
(L-inf PGD inner maximisation; `adv_fraction` weighs the adversarial loss: 1.0 is Madry et al.'s pure PGD
training) or TRADES (Eq. 4: CE + beta * KL with TRADES' KL inner maximisation, beta = 10 in the paper).
A donor may train on its own `data` (cross-task stitching); `train_size` there sets its data fraction.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timezone

import torch

from sweep import __version__
from sweep.config.donors import DonorEval, DonorSpec
from sweep.data.core import Splits
from sweep.kinds.base import RunContext, commit, failure, not_a_failure
from sweep.kinds.donor.units import DonorWork, HalfFill, donor_part
from sweep.measures.chance import at_chance
from sweep.models.base import StagedNet
from sweep.registry import DONOR_SOURCES
from sweep.store.layout import DONOR_CURVES_DIR, DONORS_DIR
from sweep.store.results import Loc, SweepDir, load_torch, recorded_row, save_torch, write_rows
from sweep.store.schema import SCHEMA_VERSION, schema
from sweep.train.donors import TRAIN_STATE
from sweep.train.evaluate import accuracy, inference_batch, predict, robust_accuracy
from sweep.worker.activations import CHUNK, compute
from sweep.worker.feed import feed
from sweep.worker.splits import worker_splits, worker_test_images
from sweep.worker.zoo import load_donor, predictions_loc


def save_donor(path: Loc, model: StagedNet, donor: DonorSpec, splits: Splits, mean, std) -> None:
    payload = {
        "arch": donor.arch,
        "in_channels": splits.in_channels,
        "num_classes": splits.num_classes,
        "mean": tuple(mean),
        "std": tuple(std),
        "image_size": splits.image_size,
        "state_dict": model.state_dict(),
        "donor": {k: v for k, v in donor.__dict__.items() if k != "data"},
        "donor_key": donor.donor_key,
    }
    save_torch(path, payload)


def run_donor(
    donor: DonorSpec,
    evaluations: tuple[DonorEval, ...],
    sweep: SweepDir,
    device: torch.device,
    progress: Callable[[dict], None] | None = None,
    data_root: str | None = None,
    download: bool = True,
    train_accuracy: bool = False,
    predictions: bool = False,
    fills: tuple[HalfFill, ...] = (),
) -> dict:
    """Train (or take from the cache) one donor and evaluate it once per evaluation; write one `donors` row
    each. Idempotent. Returns the row of the first evaluation (the donor's own test set), which with
    `train_accuracy` also measures the training images (and is measured again where a row lacks them);
    `predictions` keeps its predictions on each evaluation's test images for the trials (`test_predictions`);
    the pass over an evaluation's test images also fills the frozen halves `fills` the trials read on them."""
    parts = [donor_part(sweep, donor, ev) for ev in evaluations]
    todo = [(ev, p) for ev, p in zip(evaluations, parts) if not _recorded(p, train_accuracy and ev == evaluations[0])]
    if not todo:
        return {"donor": donor.name, "skipped": True}  # a failed evaluation is tried again
    d = donor.data
    ckpt = sweep.checkpoint(donor.donor_key)
    base = base_row(donor, sweep.name)
    t0 = time.perf_counter()
    rows = []
    try:
        splits = worker_splits(
            d.dataset, d.train_size, d.val_size, d.test_size, device, root=data_root, download=download
        )
        trained_now = not ckpt.exists() and DONOR_SOURCES[donor.source].trains
        if not ckpt.exists():
            _make_checkpoint(donor, splits, ckpt, device, progress, sweep)
        model = load_donor(sweep, donor.donor_key, device)
        train_s = time.perf_counter() - t0
    except Exception as exc:  # recorded for every evaluation; the stitching trials that need it fail
        not_a_failure(exc)  # a full disk (its checkpoint), an exiting process: raised, nothing recorded
        error = failure(exc)
        rows = [
            dict(base, **ev.row_fields(), eval_id=ev.eval_id(donor.donor_key), status="failed", error=error)
            for ev, _ in todo
        ]
    else:
        base.update(trained_now=trained_now, time_train_s=train_s)
        fed = _Pass(model, list(fills), predictions, device, data_root, download)  # shared: see `_Pass`
        for ev, _ in todo:
            row = dict(base, **ev.row_fields(), eval_id=ev.eval_id(donor.donor_key), **_evaluate(model, ev, fed))
            images = row.pop("_images", None)
            if ev == evaluations[0] and row["status"] == "done":
                row.update(_own_evaluation(model, splits, images, row["clean_acc"], train_accuracy, ev, device))
            if predictions and row["status"] == "done":  # the stitching trials read the donor
                _keep_predictions(sweep, donor.donor_key, model, ev, fed)
            rows.append(row)
    written = []
    for row, (ev, part) in zip(rows, todo):
        row["finished_at"] = datetime.now(timezone.utc)
        failed = dict(base, **ev.row_fields(), eval_id=ev.eval_id(donor.donor_key), finished_at=row["finished_at"])
        written += commit(part, [row], schema(DONORS_DIR), failed)
    return written[0]


class _Pass:
    """The donor's one pass over an evaluation's test images when the sweep's trials read the donor: its logits on
    the chunk grid (the predictions kept for the trials, and the clean accuracy where the grid is the one
    `predict` batches on), and in the same pass the frozen halves the trials read on these images
    (`sweep.worker.feed`). Without trials reading the donor, nothing: the evaluation predicts as before. One
    `_Pass` serves a donor's evaluations in turn: one whose test images are those of the evaluation before (the
    same dataset and images: e.g. the donor's own test set of nominal size 10,000 where the dataset's files hold
    the 1,000 a trial's data asks for) reads that pass instead of passing them through the donor again."""

    def __init__(self, model, fills: list[HalfFill], predictions: bool, device, data_root, download) -> None:
        self.model, self.fills, self.device = model, fills, device
        self.wanted = predictions or bool(fills)
        self.where = (data_root, download)
        self.logits: torch.Tensor | None = None
        self.last: tuple | None = None  # (dataset, images, predicted classes) of the last pass

    def predictions(self, x: torch.Tensor, dataset: str) -> torch.Tensor | None:
        """The predicted classes on `x` (the evaluation's test images of `dataset`) that `predict` would give,
        or None where this pass does not give them (no trial reads the donor, or another batch grid: a GPU's)."""
        if not self.wanted or not len(x):
            return None
        if self.last is not None and self.last[0] == dataset and same_images(self.last[1], x):
            return self.last[2]
        halves = []
        for f in self.fills:  # the fills on these images, whichever evaluation they belong to
            if f.ev.dataset != dataset:
                continue
            splits = worker_splits(*f.data, self.device, root=self.where[0], download=self.where[1])
            if same_images(splits.test_x, x):  # by construction; a mismatch fills nothing
                halves.append((splits, f.point, f.precision, f.channels_last))
        self.logits = feed(self.model, x, self.device, halves, logits=True)
        if inference_batch(500, self.device) != inference_batch(CHUNK, self.device):
            predicted = None  # `predict` batches otherwise: its own pass keeps the donors table's values
        elif not torch.isfinite(self.logits).all():
            raise FloatingPointError("the network produced non-finite logits")
        else:
            predicted = self.logits.argmax(1)
        self.last = (dataset, x, predicted)
        return predicted


def same_images(a, b) -> bool:
    """Whether two test parts hold the same images (tensors compared in full; streamed images by count)."""
    if len(a) != len(b):
        return False
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and torch.equal(a.cpu(), b.cpu())
    return True


def _keep_predictions(sweep: SweepDir, donor_key: str, model, ev: DonorEval, fed: _Pass) -> None:
    x, _ = worker_test_images(ev.dataset, ev.test_size, root=fed.where[0], download=fed.where[1])
    loc = predictions_loc(sweep, donor_key, ev.dataset, len(x))
    if not loc.exists():
        kept = fed.logits.argmax(1).cpu() if fed.logits is not None else test_predictions(model, x, fed.device)
        save_torch(loc, kept)


def test_predictions(model, x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A donor's predicted classes on `x` (int64, on the host), from logits computed on the fixed chunk
    grid, as a trial's cached logits are (`sweep.worker.activations`): the same values either way."""
    return compute(model, x, device).argmax(1).cpu()


def _recorded(part: Loc, with_train: bool) -> bool:
    """Whether `part` holds a done row, loose or compacted (and, `with_train`, one that measured the training
    images)."""
    row = recorded_row(part)
    if row is None or row.get("status") != "done":
        return False
    return not with_train or row.get("train_clean_acc") is not None


def base_row(donor: DonorSpec, sweep_name: str) -> dict:
    """The columns every `donors` row of this donor shares, whatever the evaluation."""
    return {
        "donor": donor.name,
        "ref": donor.ref,
        "donor_key": donor.donor_key,
        "sweep": sweep_name,
        "arch": donor.arch,
        "dataset": donor.data.dataset,
        "training": donor.training or donor.source,
        "epochs": donor.epochs,
        "beta": donor.beta,
        "adv_fraction": donor.adv_fraction,
        "train_eps": donor.eps,
        "train_size": donor.data.train_size,
        "seed": donor.seed,
        "freeze": ", ".join(f"{point}@{epoch}" for point, epoch in donor.freeze) if donor.freeze else None,
        "stitchsweep_version": __version__,
        "schema_version": SCHEMA_VERSION,
    }


def _make_checkpoint(
    donor: DonorSpec,
    splits: Splits,
    ckpt: Loc,
    device: torch.device,
    progress: Callable[[dict], None] | None,
    sweep: SweepDir,
) -> None:
    """Train or load the donor as its source says, and write it into the zoo's own format (a `file:` or
    `robustbench:` donor is converted once, then used like any other)."""
    model, mean, std = DONOR_SOURCES[donor.source].build(donor, splits, device, progress, ckpt.parent)
    save_donor(ckpt, model, donor, splits, mean, std)
    state = ckpt.parent / TRAIN_STATE
    if state.exists():  # a trained donor: its curves go to the sweep's donor_curves table
        history = load_torch(state).get("history", [])
        rows = [
            dict(donor=donor.name, donor_key=donor.donor_key, training=donor.training, epoch=e, metric=m, value=v)
            for e, m, v in history
        ]
        write_rows(sweep.part(DONOR_CURVES_DIR, donor.donor_key), rows, schema(DONOR_CURVES_DIR))
    state.unlink(missing_ok=True)  # the donor is complete: nothing to resume


def _accuracies(model: StagedNet, x, y, ev: DonorEval, device: torch.device, n_robust: int, pred=None) -> tuple:
    """(clean accuracy on x, robust accuracy on its first `n_robust` images) under the evaluation's attack.
    `pred`: the predictions on x, when already computed."""
    clean = accuracy(predict(model, x, device) if pred is None else pred, y)
    robust = robust_accuracy(
        model,
        x,
        y,
        n_eval=n_robust,
        eps=ev.eps,
        attacks=ev.attacks,
        iterations=ev.iterations,
        restarts=ev.restarts,
        seed=0,
        device=device,
    )
    return clean, robust


def _evaluate(model: StagedNet, ev: DonorEval, fed: _Pass) -> dict:
    """Clean and robust accuracy on the evaluation's test images (their pass `fed`); a failure is recorded in
    the row."""
    t1 = time.perf_counter()
    try:
        x, y = worker_test_images(ev.dataset, ev.test_size, root=fed.where[0], download=fed.where[1])
        clean, robust = _accuracies(model, x, y, ev, fed.device, ev.n_eval_robust, fed.predictions(x, ev.dataset))
    except Exception as exc:
        not_a_failure(exc)
        return {"status": "failed", "error": failure(exc)}
    t = time.perf_counter() - t1
    return {"status": "done", "clean_acc": clean, "robust_acc": robust, "time_eval_s": t, "_images": len(y)}


def _own_evaluation(model, splits: Splits, n: int, clean_acc: float, train: bool, ev: DonorEval, device) -> dict:
    """What the donor's own evaluation adds: whether it is better than chance (`analysis.donors`) on the `n`
    test images it was evaluated on (the images the split holds, not the nominal `test_size`: 1,000 real
    images counted as 10,000 would lower the threshold), and with `train` the same on its training images (the
    generalisation gap of Cianfarani et al. 2022 Table 1; a failure there fails the row)."""
    out = {"num_classes": splits.num_classes, "at_chance": at_chance(clean_acc, splits.num_classes, n)}
    return out | (_train_accuracies(model, splits, ev, device) if train else {})


def _train_accuracies(model: StagedNet, splits: Splits, ev: DonorEval, device: torch.device) -> dict:
    """Clean accuracy on as many training images as the evaluation has test images, robust accuracy on the
    first `n_eval_robust` of them, with the evaluation's attack. A failure fails the row, as a failure on the
    test images does (it is tried again on the next run), naming what failed."""
    n = min(len(splits.train_y), ev.test_size or len(splits.test_y))
    try:
        clean, robust = _accuracies(model, splits.train_x[:n], splits.train_y[:n], ev, device, min(ev.n_eval_robust, n))
    except Exception as exc:
        not_a_failure(exc)
        return {"status": "failed", "error": f"accuracy on the training images: {failure(exc)}"}
    return {"train_clean_acc": clean, "train_robust_acc": robust}


def run_unit(work: DonorWork, ctx: RunContext) -> dict:
    """One donor unit as the backends run it (`Kind.run`)."""
    row = run_donor(
        work.donor,
        work.evaluations,
        ctx.sweep_dir,
        ctx.device,
        ctx.report,
        data_root=ctx.data_root,
        download=ctx.download,
        train_accuracy=work.train_accuracy,
        predictions=work.predictions,
        fills=work.fills,
    )
    return {k: row.get(k) for k in ("clean_acc", "robust_acc", "error")} | {"status": row.get("status", "skipped")}
