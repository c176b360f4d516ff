"""Schedulers of units of work. `ray.py` is the only module of the project that imports Ray."""
