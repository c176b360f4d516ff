"""Pictures the report draws (images, a palette, a noise sender's samples, attacked images). Its section
(`spec.py`), its work (`run.py`), its table (`table.py`)."""

from sweep.kinds.base import Kind, register_kind
from sweep.kinds.examples.spec import OPTIONS, parse_examples
from sweep.kinds.examples.table import SCHEMA, TABLE

KIND = register_kind(
    Kind(
        name="examples",
        table=TABLE,
        section="examples",
        options=OPTIONS,
        parse=lambda raw, ctx: parse_examples(raw, ctx.donors, ctx.used),
        schema=SCHEMA,
        price="sweep.kinds.examples.cost:price",
        run="sweep.kinds.examples.run:run_examples",
        donors=lambda spec: (spec.donor,) if spec.show == "attacks" else (),
        after=("donor",),
        report="analysis.report.kinds.examples:sections",
    )
)
