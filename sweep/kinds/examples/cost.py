"""What an examples unit costs: the profile's fixed cost alone (its passes are few)."""

from __future__ import annotations

from sweep.costs.pricer import Pricer


def price(unit, p: Pricer) -> float:
    """A unit priced by the profile's fixed cost alone (its passes are few: the examples kind's)."""
    return p.unit_s
