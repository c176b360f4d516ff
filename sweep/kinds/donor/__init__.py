"""Donors: each trained here (or loaded from a file) once, and evaluated on every set of test images and attack
settings the sweep's other units read. Its units are found, not parsed: the space's `donors:` that something
uses (`units.py`); its work (`run.py`) trains or loads, evaluates, and fills the frozen halves the trials read;
its table (`table.py`). Registered first: every other kind reads donors."""

from sweep.kinds.base import Kind, register_kind
from sweep.kinds.donor.table import SCHEMA, TABLE
from sweep.kinds.donor.units import describe_donor, donor_part, donor_units
from sweep.store.layout import DONOR_CURVES_DIR

KIND = register_kind(
    Kind(
        name="donor",
        stage="zoo",
        noun="donors",
        table=TABLE,
        find_units=donor_units,
        parts=lambda sweep_dir, work: [donor_part(sweep_dir, work.donor, ev) for ev in work.evaluations],
        schema=SCHEMA,
        key="donor",
        timing=None,  # its table records training and each evaluation apart
        price="sweep.kinds.donor.cost:price",
        held="sweep.kinds.donor.cost:held",
        working="sweep.kinds.donor.cost:working",
        after_stage="sweep.backends.stage:chance_warnings",
        run="sweep.kinds.donor.run:run_unit",
        label=lambda work: f"donor {work.donor.name}",
        describe=describe_donor,
        side_parts=lambda sweep_dir, work: [sweep_dir.part(DONOR_CURVES_DIR, work.donor.donor_key)],
        leaves="sweep.kinds.donor.units:filled",  # its pass leaves the trials' frozen halves on its node
        rerun_failed=True,  # the trials that read a donor need it: a failed one is retried by every resume
        report="analysis.report.kinds.donor:sections",
    )
)
