"""Representation inversion (Jones et al. 2022; Balogh & Jelasity 2023 Section 6): images whose representation at
a point matches a target's. Its section `inversions:` (`spec.py`), its work (`run.py`), its table
(`table.py`). Registered before the similarity kind, which reads inverted images."""

from sweep.kinds.base import Kind, register_kind
from sweep.kinds.inversion.spec import OPTIONS, parse_inversions
from sweep.kinds.inversion.table import SCHEMA, TABLE

KIND = register_kind(
    Kind(
        name="inversion",
        table=TABLE,
        section="inversions",
        options=OPTIONS,
        parse=lambda raw, ctx: parse_inversions(raw, ctx.donors, ctx.used, ctx.units.get("trial", ())),
        schema=SCHEMA,
        price="sweep.kinds.inversion.cost:price",
        disk="sweep.kinds.inversion.cost:disk",
        run="sweep.kinds.inversion.run:run_inversion",
        donors=lambda spec: (spec.trial.front, spec.trial.end) if spec.trial else (spec.donor,),
        after=("donor", "trial"),
        locality=lambda spec: (spec.donor_key,),
        report="analysis.report.kinds.inversion:sections",
    )
)
