"""Representation tests (Ding et al. 2021's sensitivity and specificity, as Balogh & Jelasity 2025 Section 5 run
them): its section `representation_tests:` (`spec.py`), its work (`run.py`), its table (`table.py`)."""

from sweep.kinds.base import Kind, register_kind
from sweep.kinds.reptest.spec import OPTIONS, parse_reptests
from sweep.kinds.reptest.table import TABLE, schema


def _parse(raw, ctx) -> tuple:
    """The section's units, a unit listed twice kept once."""
    return tuple({u.unit_id: u for u in parse_reptests(raw, ctx.data, ctx.donors, ctx.used)}.values())


KIND = register_kind(
    Kind(
        name="reptest",
        noun="representation-test units",
        table=TABLE,
        section="representation_tests",
        options=OPTIONS,
        parse=_parse,
        schema=schema,
        memory="sweep.kinds.reptest.cost:need",
        working="sweep.kinds.reptest.cost:working",
        price="sweep.kinds.reptest.cost:price",
        run="sweep.kinds.reptest.run:run_unit",
        donors=lambda spec: tuple(dict.fromkeys(m[0] for m in spec.members)),
        after=("donor",),
        report="analysis.report.kinds.reptest:sections",
    )
)
