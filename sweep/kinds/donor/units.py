"""A donor unit, what the planner knows of it before it runs: the donor, every evaluation of it that the
sweep's trials read, and the frozen halves of it the trials read on those evaluations' test images (its
evaluation's pass fills them)."""

from __future__ import annotations

from dataclasses import dataclass

from sweep.config.donors import DonorEval, DonorSpec
from sweep.registry import DONOR_SOURCES


@dataclass(frozen=True)
class DonorWork:
    """A donor unit: the donor, and every evaluation of it that the sweep's trials read."""

    donor: DonorSpec
    evaluations: tuple[DonorEval, ...]
    train_accuracy: bool = False  # `evaluation.train_accuracy`: the own evaluation on training images too
    # stitching trials read it: keep its predictions on each evaluation's test images (their agreement columns)
    predictions: bool = False
    # the frozen halves of it the trials read on an evaluation's test images: its evaluation's pass fills them
    fills: tuple[HalfFill, ...] = ()


@dataclass(frozen=True)
class HalfFill:
    """A frozen half f<=point of a donor that a planned trial reads on the test images of the donor's
    evaluation `ev` (the trial's own images): the trial's data (its splits name the cached activations), the
    point, the precision and memory layout it reads them in."""

    ev: DonorEval
    data: tuple  # (dataset, train_size, val_size, test_size) of the trial
    point: str
    precision: str
    channels_last: bool


def filled(work: DonorWork) -> tuple[tuple[str, str], ...]:
    """The frozen halves (donor key, point) the donor's evaluation pass fills: where they are, a trial reads them."""
    return tuple(dict.fromkeys((work.donor.donor_key, f.point) for f in work.fills))


def donor_part(sweep_dir, donor: DonorSpec, ev: DonorEval):
    """The part that records one evaluation of a donor."""
    return sweep_dir.donor_part(donor.name, ev.eval_id(donor.donor_key))


def describe_donor(work: DonorWork) -> str:
    d = work.donor
    return f"donor {d.ref}: {d.arch} {DONOR_SOURCES[d.source].describe(d)} key={d.donor_key}"


def donor_units(sweep) -> dict[str, DonorWork]:
    """Every donor a unit uses, with what the other kinds' units read of it: its predictions (`Kind.predictions`)
    and its frozen halves on its evaluations' test images (`Kind.fills`)."""
    from sweep.registry import KINDS, resolve

    predicted: set[str] = set()
    fills: dict[str, dict] = {}
    for kind in KINDS.values():
        if kind.predictions is None and kind.fills is None:
            continue
        for unit in kind.units(sweep).values():
            predicted.update(resolve(kind.predictions)(unit) if kind.predictions else ())
            for ref, half in resolve(kind.fills)(unit) if kind.fills else ():
                fills.setdefault(ref, {})[half] = None
    return {
        n: DonorWork(
            d, sweep.donor_evals[n], sweep.evaluation.train_accuracy, d.ref in predicted, tuple(fills.get(d.ref, ()))
        )
        for n, d in sweep.donors.items()
        if d.network
    }
