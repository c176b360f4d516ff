"""Search spaces: YAML to validated, frozen, hashed specs (`space.py` for the whole file, `stitching.py` for
stitching blocks, `trial.py` for `TrialSpec`, `donors.py`, `data.py`, `evaluation.py`, `reptests.py` for their
sections; `fields.py` reads typed fields, `errors.py` says what is wrong). Importing this package imports no
torch: validation that needs a model or a dataset looks it up in the registries when it runs."""
