"""What is measured about representations: similarity indices (`similarity.py`, pure math on 2-D arrays;
`indices.py`, their registered entries), linear probes (`probing.py`), energy OOD detectors (`ood.py`)."""
