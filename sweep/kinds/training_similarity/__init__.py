"""CKA across a donor's training epochs (Cianfarani et al. 2022 Figs 6, 25). Its section `training_similarity:`
(`spec.py`), its work (`run.py`), its table (`table.py`)."""

from sweep.kinds.base import Kind, register_kind
from sweep.kinds.training_similarity.spec import TRAINING_OPTIONS as OPTIONS
from sweep.kinds.training_similarity.spec import parse_training_similarity
from sweep.kinds.training_similarity.table import SCHEMA, TABLE

KIND = register_kind(
    Kind(
        name="training_similarity",
        stage="training-similarity",
        noun="training-similarity units",
        table=TABLE,
        section="training_similarity",
        options=OPTIONS,
        parse=lambda raw, ctx: parse_training_similarity(raw, ctx.data, ctx.evaluation, ctx.donors, ctx.used),
        schema=SCHEMA,
        memory="sweep.kinds.training_similarity.cost:need",
        price="sweep.kinds.training_similarity.cost:price",
        run="sweep.kinds.training_similarity.run:run_training_similarity",
        donors=lambda spec: (spec.donor,),
        epochs=lambda spec: ((spec.donor_key, e) for e in spec.epochs),  # its donor's kept epochs
        after=("donor",),
        report="analysis.report.kinds.training_similarity:sections",
    )
)
