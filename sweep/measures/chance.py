"""Donors that ended training at chance: the rule the zoo stage records (`at_chance` in the donors table) and
the warning it prints. A donor whose own test accuracy is within three binomial standard errors of chance
(1 / classes) learned nothing its stitching can be read against (`analysis.donors` marks the trials built on
it). Imports neither torch nor pandas."""

from __future__ import annotations

import math


def at_chance(accuracy: float, num_classes: int, n: int) -> bool:
    """Whether `accuracy` on `n` test images is no better than guessing among `num_classes` classes, by more than
    three standard errors of a guesser's accuracy (chance 1/C, standard error sqrt(p (1 - p) / n))."""
    p = 1.0 / num_classes
    return accuracy <= p + 3.0 * math.sqrt(p * (1.0 - p) / max(1, n))


def chance_warning(row: dict) -> str:
    """The line the zoo stage prints for a donors-table row flagged `at_chance`."""
    return (
        f"warning: donor {row['ref']} ended training at chance accuracy ({row['clean_acc']:.1%} on"
        f" {row['test_size']} test images, chance {1 / row['num_classes']:.1%}): the stitching built on it is"
        " marked `donor_at_chance`"
    )
