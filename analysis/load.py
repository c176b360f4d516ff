"""Read a results directory into pandas with the explicit schemas of `analysis.schema`.

Every part is cast to the known schema (columns a part lacks come back as nulls); columns a part has beyond
the schema are kept too, so nothing written is dropped silently. Temporary files (".tmp-*") are ignored.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .schema import CURVES_DIR, DONORS_DIR, SCHEMAS, TRIALS_DIR


def _parts(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("*.parquet") if not p.name.startswith("."))


def read_table(results: str | Path, kind: str) -> pa.Table:
    """All parts of `kind` ("trials", "donors" or "curves") as one Arrow table with a unified schema."""
    schema = SCHEMAS[kind]
    tables = []
    for part in _parts(Path(results) / kind):
        t = pq.read_table(part)
        for field in schema:  # add the columns this part predates
            if field.name not in t.column_names:
                t = t.append_column(field, pa.nulls(len(t), field.type))
        tables.append(t)
    if not tables:
        return schema.empty_table()
    table = pa.concat_tables(tables, promote_options="permissive")
    known = [f.name for f in schema]
    extra = [c for c in table.column_names if c not in known]
    return table.select(known + extra).cast(pa.schema(list(schema) + [table.schema.field(c) for c in extra]))


def load_trials(results: str | Path) -> pd.DataFrame:
    """One row per recorded trial (done and failed)."""
    return read_table(results, TRIALS_DIR).to_pandas()


def load_donors(results: str | Path) -> pd.DataFrame:
    """One row per donor and evaluation setting; the latest record of each when evaluated more than once."""
    df = read_table(results, DONORS_DIR).to_pandas()
    if len(df):
        df = df.sort_values("finished_at").drop_duplicates(["donor", "donor_key", "eps", "n_eval_robust"],
                                                           keep="last")
    return df.reset_index(drop=True)


def load_curves(results: str | Path) -> pd.DataFrame:
    """Training curves in long format: trial_id, epoch, metric, value."""
    return read_table(results, CURVES_DIR).to_pandas()


def load(results: str | Path) -> dict[str, pd.DataFrame]:
    """All three tables of a results directory: {"trials", "donors", "curves"}."""
    return {"trials": load_trials(results), "donors": load_donors(results), "curves": load_curves(results)}
