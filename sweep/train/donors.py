"""Donor training (Balogh & Jelasity 2023 A.2-A.3) and the registry of training methods.

Plain training: by default SGD with Nesterov momentum 0.9, weight decay 1e-4, learning rate divided by 10 at 1/3
and 2/3 of the epochs (another registered optimiser or schedule when the donor names one), optional crop / flip /
affine augmentation. A training method is one registered entry: the
loss of a batch, and the donor fields it reads (a field no method of the donor reads is refused when the
search space is read).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from sweep.data.augment import augment
from sweep.data.core import Splits, batches
from sweep.data.stream import chunks
from sweep.models.base import StagedNet, build, split
from sweep.registry import TRAINING_METHODS
from sweep.store.results import Loc, load_torch, save_torch
from sweep.train.attacks import trades_linf, trades_loss
from sweep.train.declared import TrainingMethod
from sweep.train.evaluate import inference_batch
from sweep.train.loops import (
    EpochLoss,
    GraphedStep,
    autocast,
    float32_value,
    optimiser_step,
    schedule_step,
    to_device,
)
from sweep.train.optimizers import make_optimizer, make_schedule
from sweep.train.threats import attack, craft

_ce = nn.CrossEntropyLoss()


def plain_loss(model, xb, yb, donor, gen):
    model.train()
    return _ce(model(xb), yb)


def madry_loss(threat: str, model, xb, yb, donor, gen):
    """Adversarial training against `threat` (Madry et al.): the loss on the attacked batch, crafted with
    frozen BatchNorm statistics; `adv_fraction` < 1 mixes in the clean loss."""
    model.eval()
    x_adv = attack(threat, model, xb, yb, donor.eps, donor.step_size, donor.steps, generator=gen)
    model.train()
    value = donor.adv_fraction * _ce(model(x_adv), yb)
    if donor.adv_fraction < 1.0:
        value = value + (1 - donor.adv_fraction) * _ce(model(xb), yb)
    return value


def trades_donor_loss(model, xb, yb, donor, gen):
    model.eval()
    x_adv = trades_linf(model, xb, donor.eps, donor.step_size, donor.steps, generator=gen)
    model.train()
    return trades_loss(model, xb, yb, x_adv, donor.beta)


TRAIN_STATE = "train_state.pt"  # the latest epoch's model, optimiser, schedule and RNG states (resuming)


def epoch_checkpoint(workdir: Loc, epoch: int) -> Loc:
    """Where a donor trained with `checkpoint_every` keeps the weights of `epoch`."""
    return workdir / "epochs" / f"epoch-{epoch:04d}.pt"


def train_donor(
    donor,
    splits: Splits,
    device: torch.device,
    progress: Callable[[dict], None] | None = None,
    workdir: Loc | None = None,
) -> StagedNet:
    """Train a zoo donor (a `DonorSpec`); returns it in eval mode. With a `workdir` (its zoo folder) the state
    after every epoch is kept there (`TRAIN_STATE`), and a run that finds one continues from it: on the same
    device and thread count it ends with the weights of an uninterrupted run. The epochs of `kept_epochs`
    keep their weights (`epoch_checkpoint`)."""
    torch.manual_seed(donor.seed)
    model = build(
        donor.arch, splits.in_channels, splits.num_classes, splits.mean, splits.std, image_size=splits.image_size
    ).to(device)
    precision, channels_last = donor.precision or "fp32", bool(donor.channels_last)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    o = donor.optimiser()
    opt = make_optimizer(o["optimizer"], model.parameters(), donor.lr, o["momentum"], o["weight_decay"])
    sched = make_schedule(o["lr_schedule"], opt, donor.epochs)
    gen = torch.Generator().manual_seed(donor.seed)
    method = TRAINING_METHODS.get_entry(donor.training)
    history: list[list] = []  # [epoch, metric, value]: the donor's training curves
    start = _resume(workdir, donor, model, opt, sched, gen, device, progress, history)

    def batch_loss(xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        with autocast(device, precision, cache=not captured):
            return method.loss(model, xb, yb, donor, gen)

    # a loss of the batch alone (no attack drawing from the generator) is replayed from a CUDA graph on a GPU
    # (not while layers freeze: a graph would keep updating them)
    captured = device.type == "cuda" and method.capturable and not donor.freeze
    step = GraphedStep(batch_loss, opt, device) if captured else (lambda x, y: optimiser_step(opt, batch_loss(x, y)))
    for through, after in donor.freeze or ():
        if after < start:  # resumed past it
            freeze_through(model, through)
    for epoch in range(start, donor.epochs + 1):
        losses = EpochLoss(f"donor {donor.name}, epoch {epoch}")
        for xb, yb in batches(splits.train_x, splits.train_y, donor.batch_size, gen):
            if donor.augment:
                xb = augment(xb, donor.augment, gen)
            xb, yb = to_device(xb, device, channels_last), yb.to(device)
            losses.add(step(xb, yb), len(yb))
            schedule_step(sched, "batch")
        schedule_step(sched, "epoch")
        metrics = {"train_loss": float32_value(losses.mean()), **validation(model, splits, donor, method, device)}
        history.extend([epoch, k, v] for k, v in metrics.items())
        for through, after in donor.freeze or ():
            if after == epoch:
                freeze_through(model, through)
        if workdir is not None:
            _keep(workdir, donor, epoch, model, opt, sched, gen, history)
        if progress is not None:
            progress({"phase": "zoo", "epoch": epoch, "epochs": donor.epochs, **metrics})
    model.eval()
    return model


def freeze_through(model: StagedNet, point: str) -> None:
    """Stop training `point` and every stage before it (Cianfarani et al. 2022 D.5): their parameters take no
    gradient (so no optimiser, weight decay included, moves them) and their BatchNorm layers stop tracking
    statistics (in training mode a batch is still normalised by its own; evaluation uses the frozen ones)."""
    front, _ = split(model, point)
    for p in front.parameters():
        p.requires_grad_(False)
        p.grad = None
    for m in front.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.track_running_stats = False


VAL_ATTACK_SEED = 12345  # the validation attack's own random starts: training's generator is left alone


def validation(model, splits: Splits, donor, method: TrainingMethod, device: torch.device) -> dict:
    """Cross-entropy and accuracy on the validation split, and, for an adversarial method, on its adversarial
    examples of it (the method's own threat model: Cianfarani et al. 2022 Fig. 6's adversarial validation loss)."""
    if len(splits.val_y) == 0:
        return {}
    was = model.training
    model.eval()
    x, y = splits.val_x, splits.val_y
    out = _loss_and_accuracy(model, x, y, device, "val")
    if "eps" in method.fields:
        args = (donor.eps, donor.step_size, donor.steps, VAL_ATTACK_SEED, device)
        out.update(_loss_and_accuracy(model, craft(method.threat, model, x, y, *args), y, device, "val_adv"))
    model.train(was)
    return out


def _loss_and_accuracy(model, x: torch.Tensor, y: torch.Tensor, device: torch.device, prefix: str) -> dict:
    """Loss summed per 500 images; their logits computed in inference batches (`inference_batch`: on the CPU a
    forward of 500 images held 0.5 GB of a CIFAR ResNet-18's activations, the donor stage's peak)."""
    loss, right = 0.0, 0
    step = inference_batch(500, device)
    with torch.no_grad():
        for xb, yb in zip(chunks(x, 500), chunks(y, 500)):
            logits = torch.cat([model(piece.to(device)) for piece in chunks(xb, step)])
            target = yb.to(device)
            loss += float(nn.functional.cross_entropy(logits, target, reduction="sum"))
            right += int((logits.argmax(1) == target).sum())
    return {f"{prefix}_loss": float32_value(loss / len(y)), f"{prefix}_acc": right / len(y)}


def kept_weights(state: dict, dtype: str | None) -> dict:
    """A state dict as a kept epoch stores it: floating-point tensors in `dtype` (None: float32, as trained);
    integer buffers (BatchNorm's batch count) as they are. Loading it into a model casts back to float32."""
    if dtype is None:
        return state
    to = getattr(torch, dtype)
    return {k: v.to(to) if v.is_floating_point() else v for k, v in state.items()}


def _keep(workdir: Loc, donor, epoch: int, model, opt, sched, gen: torch.Generator, history: list) -> None:
    if epoch in donor.kept_epochs:
        kept = kept_weights(model.state_dict(), donor.keep_dtype)
        save_torch(epoch_checkpoint(workdir, epoch), {"epoch": epoch, "state_dict": kept})
    state = {
        "donor_key": donor.donor_key,
        "epoch": epoch,
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict(),
        "generator": gen.get_state(),
        "torch_rng": torch.get_rng_state(),
        "history": history,
    }
    save_torch(workdir / TRAIN_STATE, state)  # one file, replaced whole: a kill leaves the previous epoch's


def _resume(workdir, donor, model, opt, sched, gen, device, progress, history: list) -> int:
    """The first epoch to train: 1, or the one after the state a killed run left in `workdir`."""
    path = None if workdir is None else workdir / TRAIN_STATE
    if path is None or not path.exists():
        return 1
    state = load_torch(path, map_location=device)
    if state.get("donor_key") != donor.donor_key:
        return 1
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    sched.load_state_dict(state["scheduler"])
    gen.set_state(state["generator"])
    torch.set_rng_state(state["torch_rng"])
    history.extend(state.get("history", []))
    if progress is not None:
        progress({"phase": "zoo_resumed", "epoch": state["epoch"], "epochs": donor.epochs})
    return state["epoch"] + 1


def build_zoo_donor(donor, splits: Splits, device: torch.device, progress=None, workdir: Loc | None = None):
    """The `zoo:` donor source: trained here (resumably, in `workdir`), normalised with its data's statistics."""
    return train_donor(donor, splits, device, progress, workdir), splits.mean, splits.std
