"""The shipped kinds of work, declared: what planning reads of each (its section and how it parses, its units,
their parts, labels, groups, the donors they read, the order they run in). Each kind's work is a function of
its own module (`donor.py`, `stitch.py`, ...), named here as `"module:function"` and imported only when a unit
runs, so checking a space (`stitchsweep plan`) loads no PyTorch. Registration order is run order: donors
first, since the others read them."""

from __future__ import annotations

from dataclasses import dataclass

from sweep.config.block import OPTIONS as BLOCK_OPTIONS
from sweep.config.donors import DonorEval, DonorSpec
from sweep.config.embedding import OPTIONS as TSNE_OPTIONS
from sweep.config.embedding import parse_embeddings
from sweep.config.examples import OPTIONS as EXAMPLES_OPTIONS
from sweep.config.examples import parse_examples
from sweep.config.inversion import OPTIONS as INVERSION_OPTIONS
from sweep.config.inversion import parse_inversions
from sweep.config.reptests import OPTIONS as REPTEST_OPTIONS
from sweep.config.reptests import parse_reptests
from sweep.config.similarity import OPTIONS as SIMILARITY_OPTIONS
from sweep.config.similarity import parse_similarity
from sweep.config.stitching import read_stitching
from sweep.config.training_similarity import TRAINING_OPTIONS, parse_training_similarity
from sweep.kinds.base import Kind, register_kind
from sweep.registry import DONOR_SOURCES
from sweep.store.layout import EXAMPLES_DIR, INVERSIONS_DIR, SIMILARITY_DIR, TRAINING_SIMILARITY_DIR, TSNE_DIR
from sweep.store.schema import DONOR_SCHEMA, reptests_schema, similarity_schema, trials_schema
from sweep.store.units import (
    EXAMPLES_SCHEMA,
    INVERSION_SCHEMA,
    TRAINING_SIMILARITY_SCHEMA,
    TSNE_SCHEMA,
)

# What planning and the backend read of a kind beyond its units (memory, price, the end of its stage): named,
# imported when used, so that declaring the kinds imports no planning model.
_MEMORY, _PRICES = "sweep.plan.memory", "sweep.plan.prices"


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


def trial_fills(trial) -> list[tuple[str, HalfFill]]:
    """(donor ref, half) for each frozen half a stitching trial reads on its test images: the front at the
    trial's precision for the clean evaluation (unless the fit moves its statistics: then only the indices read
    it, before the fit), the front and end halves in fp32 for the indices and the OOD AUROC. None for a noise
    sender (its halves are drawn per trial) or a donor evaluated on other images (cross-task: its own test set).
    Mirrors what `sweep.kinds.stitch` reads through `Frozen.on("test")`."""
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


def donor_part(sweep_dir, donor: DonorSpec, ev: DonorEval):
    """The part that records one evaluation of a donor."""
    return sweep_dir.donor_part(donor.name, ev.eval_id(donor.donor_key))


def _describe_donor(work: DonorWork) -> str:
    d = work.donor
    return f"donor {d.ref}: {d.arch} {DONOR_SOURCES[d.source].describe(d)} key={d.donor_key}"


def _donor_units(sweep) -> dict[str, DonorWork]:
    trials = sweep.units.get("trial", ())
    in_trials = {ref for t in trials for ref in (t.front, t.end)}
    fills: dict[str, dict] = {}
    for t in trials:
        for ref, half in trial_fills(t):
            fills.setdefault(ref, {})[half] = None
    return {
        n: DonorWork(
            d, sweep.donor_evals[n], sweep.evaluation.train_accuracy, d.ref in in_trials, tuple(fills.get(d.ref, ()))
        )
        for n, d in sweep.donors.items()
        if d.network
    }


def _by_id(units) -> tuple:
    return tuple({u.unit_id: u for u in units}.values())


register_kind(
    Kind(
        name="donor",
        stage="zoo",
        noun="donors",
        table="donors",
        find_units=_donor_units,
        parts=lambda sweep_dir, work: [donor_part(sweep_dir, work.donor, ev) for ev in work.evaluations],
        schema=DONOR_SCHEMA,
        key="donor",
        timing=None,  # its table records training and each evaluation apart
        price=f"{_PRICES}:donor_seconds",
        after_stage="sweep.backends.stage:chance_warnings",
        run="sweep.kinds.donor:run_unit",
        label=lambda work: f"donor {work.donor.name}",
        describe=_describe_donor,
        rerun_failed=True,  # the trials that read a donor need it: a failed one is retried by every resume
    )
)
register_kind(
    Kind(
        name="trial",
        stage="stitch",
        noun="trials",
        table="trials",
        section="stitching",
        options=BLOCK_OPTIONS,
        parse=read_stitching,
        unit_id=lambda spec: spec.trial_id,
        parts=lambda sweep_dir, spec: [sweep_dir.trial_part(spec.trial_id)],
        schema=trials_schema,
        key="trial_id",
        timing="time_total_s",
        memory=f"{_MEMORY}:trial_need",
        price=f"{_PRICES}:trial_price",
        run="sweep.kinds.stitch:run_unit",
        label=lambda spec: spec.label,
        group=lambda spec: spec.group,
        donors=lambda spec: (spec.front, spec.end),
        after=("donor",),
        locality=lambda spec: (spec.front_key, spec.front_point, spec.end_key, spec.end_point),
        halves=lambda spec: ((spec.front_key, spec.front_point), (spec.end_key, spec.end_point)),
    )
)
register_kind(
    Kind(
        name="reptest",
        stage="reptest",
        noun="representation-test units",
        table="reptests",
        section="representation_tests",
        options=REPTEST_OPTIONS,
        parse=lambda raw, ctx: _by_id(parse_reptests(raw, ctx.data, ctx.donors, ctx.used)),
        unit_id=lambda spec: spec.unit_id,
        parts=lambda sweep_dir, spec: [sweep_dir.reptest_part(spec.unit_id)],
        schema=reptests_schema,
        memory=f"{_MEMORY}:reptest_need",
        price=f"{_PRICES}:reptest_seconds",
        run="sweep.kinds.reptest:run_unit",
        label=lambda spec: spec.label,
        donors=lambda spec: tuple(dict.fromkeys(m[0] for m in spec.members)),
        after=("donor",),
    )
)
register_kind(  # before similarity: it reads inverted images
    Kind(
        name="inversion",
        stage="inversion",
        noun="inversion units",
        table=INVERSIONS_DIR,
        section="inversions",
        options=INVERSION_OPTIONS,
        parse=lambda raw, ctx: parse_inversions(raw, ctx.donors, ctx.used, ctx.units.get("trial", ())),
        unit_id=lambda spec: spec.unit_id,
        parts=lambda sweep_dir, spec: [sweep_dir.part(INVERSIONS_DIR, spec.unit_id)],
        schema=INVERSION_SCHEMA,
        price=f"{_PRICES}:inversion_seconds",
        run="sweep.kinds.inversion:run_inversion",
        label=lambda spec: spec.label,
        donors=lambda spec: (spec.trial.front, spec.trial.end) if spec.trial else (spec.donor,),
        after=("donor", "trial"),
        locality=lambda spec: (spec.donor_key,),
    )
)
register_kind(
    Kind(
        name="similarity",
        stage="similarity",
        noun="similarity units",
        table=SIMILARITY_DIR,
        section="similarity",
        options=SIMILARITY_OPTIONS,
        parse=lambda raw, ctx: parse_similarity(
            raw, ctx.data, ctx.evaluation, ctx.donors, ctx.used, ctx.units.get("inversion", ())
        ),
        unit_id=lambda spec: spec.unit_id,
        parts=lambda sweep_dir, spec: [sweep_dir.part(SIMILARITY_DIR, spec.unit_id)],
        schema=similarity_schema,
        memory=f"{_MEMORY}:similarity_need",
        price=f"{_PRICES}:similarity_seconds",
        run="sweep.kinds.similarity:run_similarity",
        label=lambda spec: spec.label,
        donors=lambda spec: tuple(r for r in dict.fromkeys((spec.a, spec.b, spec.attack_source)) if r),
        after=("donor", "inversion"),
    )
)
register_kind(
    Kind(
        name="training_similarity",
        stage="training-similarity",
        noun="training-similarity units",
        table=TRAINING_SIMILARITY_DIR,
        section="training_similarity",
        options=TRAINING_OPTIONS,
        parse=lambda raw, ctx: parse_training_similarity(raw, ctx.data, ctx.evaluation, ctx.donors, ctx.used),
        unit_id=lambda spec: spec.unit_id,
        parts=lambda sweep_dir, spec: [sweep_dir.part(TRAINING_SIMILARITY_DIR, spec.unit_id)],
        schema=TRAINING_SIMILARITY_SCHEMA,
        memory=f"{_MEMORY}:training_similarity_need",
        price=f"{_PRICES}:training_similarity_seconds",
        run="sweep.kinds.training_similarity:run_training_similarity",
        label=lambda spec: spec.label,
        donors=lambda spec: (spec.donor,),
        after=("donor",),
    )
)
register_kind(
    Kind(
        name="tsne",
        stage="tsne",
        noun="t-SNE units",
        table=TSNE_DIR,
        section="tsne",
        options=TSNE_OPTIONS,
        parse=lambda raw, ctx: parse_embeddings(raw, ctx.donors, ctx.used),
        unit_id=lambda spec: spec.unit_id,
        parts=lambda sweep_dir, spec: [sweep_dir.part(TSNE_DIR, spec.unit_id)],
        schema=TSNE_SCHEMA,
        memory=f"{_MEMORY}:embedding_need",
        price=f"{_PRICES}:tsne_seconds",
        run="sweep.kinds.embedding:run_embedding",
        label=lambda spec: spec.label,
        donors=lambda spec: (spec.donor,),
        after=("donor",),
        locality=lambda spec: (spec.donor_key,),
    )
)
register_kind(
    Kind(
        name="examples",
        stage="examples",
        noun="examples units",
        table=EXAMPLES_DIR,
        section="examples",
        options=EXAMPLES_OPTIONS,
        parse=lambda raw, ctx: parse_examples(raw, ctx.donors, ctx.used),
        unit_id=lambda spec: spec.unit_id,
        parts=lambda sweep_dir, spec: [sweep_dir.part(EXAMPLES_DIR, spec.unit_id)],
        schema=EXAMPLES_SCHEMA,
        price=f"{_PRICES}:overhead_seconds",
        run="sweep.kinds.examples:run_examples",
        label=lambda spec: spec.label,
        donors=lambda spec: (spec.donor,) if spec.show == "attacks" else (),
        after=("donor",),
    )
)
