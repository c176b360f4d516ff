"""The results store, which the engine writes and `analysis` reads: where a sweep's files live (`layout.py`),
the Parquet tables' schemas (`schema.py`, `columns.py`), the units' parts (`units.py`), the inverted images'
index (`inverted.py`), the similarity indices' catalogue (`catalogue.py`), local folders and pyarrow.fs URIs
with atomic writes (`storage.py`), and a sweep's folder as the engine writes it (`results.py`). Importing it
imports neither pandas, Altair, torch nor Ray."""
