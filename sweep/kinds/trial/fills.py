"""What a stitching trial reads of its donors that their evaluation's pass computes once for every trial: the
frozen halves on the trial's test images (`Kind.fills`), and their predictions there (`Kind.predictions`)."""

from __future__ import annotations

from sweep.kinds.donor.units import HalfFill


def trial_fills(trial) -> list[tuple[str, HalfFill]]:
    """(donor ref, half) for each frozen half a stitching trial reads on its test images: the front at the
    trial's precision for the clean evaluation (unless the fit moves its statistics: then only the indices read
    it, before the fit), the front and end halves in fp32 for the indices and the OOD AUROC. None for a noise
    sender (its halves are drawn per trial) or a donor evaluated on other images (cross-task: its own test set).
    Mirrors what `sweep.kinds.trial.run` reads through `Frozen.on("test")`."""
    if trial.noise_sigma is not None:
        return []
    data = (trial.dataset, trial.train_size, trial.val_size, trial.test_size)
    frozen = trial.donor_bn != "update"  # else the fit moves the front's statistics: read again uncached after it
    front = [trial.precision] * frozen + ["fp32"] * bool(trial.indices or (trial.ood_outliers and frozen))
    end = ["fp32"] * bool(trial.indices or trial.ood_outliers)
    sides = [
        (trial.front, trial.front_eval, trial.front_point, front),
        (trial.end, trial.end_eval, trial.end_point, end),
    ]
    return [
        (ref, HalfFill(ev, data, point, p, trial.channels_last))
        for ref, ev, point, reads in sides
        if ev is not None and ev.dataset == trial.dataset
        for p in dict.fromkeys(reads)
    ]


def predictions(trial) -> tuple[str, str]:
    """The donors whose predictions on its test images a trial reads (its agreement columns)."""
    return (trial.front, trial.end)
