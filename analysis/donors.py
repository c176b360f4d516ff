"""Donors that ended training at chance, and the stitching built on them.

A donor whose own test accuracy is within three binomial standard errors of chance (1 / classes) learned nothing
its stitching can be read against: Smith & Marcu's VGG-19, trained as the authors' notebook trains it on
greyscale MNIST, can stay at chance (its loss at 50 epochs x ln 10). Such a donor is flagged (`at_chance` in the
donors table, from its own evaluation), the zoo stage prints a warning naming it, and every trial with it as a
front or an end is marked (`donor_at_chance` in the report's trials table).
"""

from __future__ import annotations

import pandas as pd

from sweep.measures.chance import at_chance, chance_warning

__all__ = ["at_chance", "chance_donors", "chance_warnings", "mark_trials"]


def chance_donors(donors: pd.DataFrame) -> pd.DataFrame:
    """The donors rows flagged `at_chance` (their own evaluation), one per donor key."""
    if donors.empty or "at_chance" not in donors:
        return donors.iloc[0:0]
    flagged = donors[donors["at_chance"].fillna(False).astype(bool)]
    return flagged.drop_duplicates("donor_key")


def chance_warnings(donors: pd.DataFrame) -> list[str]:
    """One line per flagged donor, as the zoo stage prints them."""
    return [chance_warning(r) for _, r in chance_donors(donors).iterrows()]


def mark_trials(trials: pd.DataFrame, donors: pd.DataFrame) -> pd.DataFrame:
    """`trials` with a column `donor_at_chance`: the refs of its flagged donors (front, end), or empty."""
    flagged = set(chance_donors(donors)["ref"]) if len(donors) else set()

    def which(row) -> str:
        return ", ".join(ref for ref in dict.fromkeys((row["front"], row["end"])) if ref in flagged)

    return trials.assign(donor_at_chance=trials.apply(which, axis=1) if len(trials) else pd.Series(dtype=str))
