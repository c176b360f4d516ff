"""What is measured about representations: similarity indices (`indices/`, one module per index: its catalogue
entry, memory and work models, math and registration; `similarity.py`, `matrices.py` and `cca.py`, the math they
share, and the similarity kinds' CKA estimators), linear probes (`probing.py`), energy OOD detectors (`ood.py`)."""
