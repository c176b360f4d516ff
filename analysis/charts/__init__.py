"""The report's charts, one module per family of what they draw: stitching grids and settings
(`stitching.py`), CKA and similarity matrices (`cka.py`, `grids.py`), training curves (`curves.py`),
robustness and inverted images (`robustness.py`), OOD energies (`energies.py`), example images
(`examples.py`), sender agreement (`senders.py`); the confidence bands they share are `analysis.intervals`."""
