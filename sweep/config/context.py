"""What a kind's section parser gets besides its own section (`SpaceContext`), apart from `space.py` so that
the sections' parsers can name it without importing the whole space's reader."""

from __future__ import annotations

from dataclasses import dataclass, field

from sweep.config.data import DataSpec
from sweep.config.donors import DonorSpec
from sweep.config.evaluation import EvalSpec


@dataclass
class SpaceContext:
    """What a kind's section parser gets besides its own section: the validated data, evaluation and donors,
    and `used`, the donor names its units use (it adds them: only used donors are trained); `units`, the units
    of the kinds parsed before it (registration order), by kind name, for sections that refer to them."""

    data: DataSpec
    evaluation: EvalSpec
    donors: dict[str, DonorSpec]
    used: set[str]
    units: dict[str, tuple] = field(default_factory=dict)
