"""What is known before a sweep runs: which units a space holds and which can run (`planning.py`), what a
results root has recorded (`status.py`), the memory a unit needs and whether it fits (`memory.py`), the disk
its results take (`disk.py`), the cost model (`estimate.py`, `prices.py`, `index_costs.py`, calibrated by
`calibration.py` into the machines' profiles in `profiles/`)."""
