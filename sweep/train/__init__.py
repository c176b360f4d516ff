"""Training and evaluation pieces shared by every kind of work: attacks (`attacks.py`), the step schedule and
guarded optimiser step (`loops.py`), accuracies (`evaluate.py`)."""
