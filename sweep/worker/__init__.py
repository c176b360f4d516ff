"""What a worker keeps while it runs units: the cache of splits, donors and activations (`cache.py`), the splits
and test images it reads through that cache (`splits.py`), the activations of frozen fronts (`activations.py`)
and the donors loaded from the zoo (`zoo.py`)."""
