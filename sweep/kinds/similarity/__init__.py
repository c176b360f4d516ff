"""Similarity without stitching (Cianfarani et al. 2022): CKA and the other measures between two donors' points, on
benign, adversarial or inverted images. Its section `similarity:` (`spec.py`), its work (`run.py`), its
table (`table.py`)."""

from sweep.kinds.base import Kind, register_kind
from sweep.kinds.similarity.spec import OPTIONS, parse_similarity
from sweep.kinds.similarity.table import SCHEMA, TABLE
from sweep.store.schema import with_indices


def _parse(raw, ctx) -> tuple:
    return parse_similarity(raw, ctx.data, ctx.evaluation, ctx.donors, ctx.used, ctx.units.get("inversion", ()))


KIND = register_kind(
    Kind(
        name="similarity",
        table=TABLE,
        section="similarity",
        options=OPTIONS,
        parse=_parse,
        schema=lambda: with_indices(SCHEMA, "similarity"),  # a plugin's index of this scope: its column too
        memory="sweep.kinds.similarity.cost:need",
        price="sweep.kinds.similarity.cost:price",
        run="sweep.kinds.similarity.run:run_similarity",
        donors=lambda spec: tuple(r for r in dict.fromkeys((spec.a, spec.b, spec.attack_source)) if r),
        after=("donor", "inversion"),
        report="analysis.report.kinds.similarity:sections",
    )
)
