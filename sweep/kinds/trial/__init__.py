"""Stitching trials: a front network cut at one point, an end network from another, a stitcher between them
fitted by an objective, and everything measured of the stitched network. Its section `stitching:` (`spec.py`,
its options `block.py`, the unit `sweep.config.trial.TrialSpec`), its work (`run.py`, the stitched network
`stitched.py`, the indices and OOD of a trial `measures.py`), its table (`table.py`)."""

from sweep.kinds.base import Kind, register_kind
from sweep.kinds.trial.block import OPTIONS
from sweep.kinds.trial.spec import read_stitching
from sweep.kinds.trial.table import TABLE, schema
from sweep.store.layout import ENERGIES_DIR

KIND = register_kind(
    Kind(
        name="trial",
        stage="stitch",
        noun="trials",
        table=TABLE,
        section="stitching",
        options=OPTIONS,
        parse=read_stitching,
        unit_id=lambda spec: spec.trial_id,
        parts=lambda sweep_dir, spec: [sweep_dir.trial_part(spec.trial_id)],
        schema=schema,
        key="trial_id",
        timing="time_total_s",
        memory="sweep.kinds.trial.cost:need",
        held="sweep.kinds.trial.cost:held",
        working="sweep.kinds.trial.cost:working",
        price="sweep.kinds.trial.cost:price",
        run="sweep.kinds.trial.run:run_unit",
        group=lambda spec: spec.group,
        donors=lambda spec: (spec.front, spec.end),
        after=("donor",),
        locality=lambda spec: (spec.front_key, spec.front_point, spec.end_key, spec.end_point),
        halves=lambda spec: ((spec.front_key, spec.front_point), (spec.end_key, spec.end_point)),
        fills="sweep.kinds.trial.fills:trial_fills",
        side_parts=lambda sweep_dir, spec: [
            sweep_dir.curve_part(spec.trial_id),
            sweep_dir.part(ENERGIES_DIR, spec.trial_id),
        ],
        predictions="sweep.kinds.trial.fills:predictions",
        report="analysis.report.kinds.trial:sections",
    )
)
