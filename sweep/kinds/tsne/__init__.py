"""t-SNE maps of a donor's points (Balogh & Jelasity 2023 Fig. 7). Its section (`spec.py`), its work (`run.py`),
its table (`table.py`)."""

from sweep.kinds.base import Kind, register_kind
from sweep.kinds.tsne.spec import OPTIONS, parse_embeddings
from sweep.kinds.tsne.table import SCHEMA, TABLE

KIND = register_kind(
    Kind(
        name="tsne",
        noun="t-SNE units",
        table=TABLE,
        section="tsne",
        options=OPTIONS,
        parse=lambda raw, ctx: parse_embeddings(raw, ctx.donors, ctx.used),
        schema=SCHEMA,
        memory="sweep.kinds.tsne.cost:need",
        price="sweep.kinds.tsne.cost:price",
        run="sweep.kinds.tsne.run:run_embedding",
        donors=lambda spec: (spec.donor,),
        after=("donor",),
        locality=lambda spec: (spec.donor_key,),
        report="analysis.report.kinds.tsne:sections",
    )
)
