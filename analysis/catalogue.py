"""The measures that results record and reports read: one entry per similarity index, written once.

Torch-free, so that both sides read it: the engine registers each index's function against its entry here
(`sweep/measures/similarity.py`), the reports take names, columns and directions from it (`tables.py`: the
layer matrices and Table 1; `stats.py`: Tables 2-3). The stitching objectives' own measures (relative accuracy,
OOD AUROC per objective) are derived from the objectives present in the results, so no objective name is
written here either.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IndexEntry:
    """A similarity index between f<=i and g<=j, as the results record it."""

    index: str  # its name in a search space (`indices:`)
    column: str  # the trials column
    label: str  # its name in reports
    larger_is_more_similar: bool
    reptest_column: str | None = None  # its dissimilarity column in representation tests (d = 1 - s, or s)
    reptest_label: str | None = None


INDEX_ENTRIES: tuple[IndexEntry, ...] = (
    IndexEntry("cka", "sim_cka", "cka", True, "d_cka", "cka"),
    IndexEntry("pwcca", "sim_pwcca", "pwcca", True, "d_pwcca", "pwcca"),
    IndexEntry("opd", "sim_opd", "opd", False, "d_opd", "opd"),
    IndexEntry("dm", "sim_dm", "dm distance", False, "d_dm", "dm (struct.)"),
)
INDEX_BY_NAME = {e.index: e for e in INDEX_ENTRIES}

# Representation tests also score functional DM: 1 - the relative accuracy of B stitched into A's network.
FUNCTIONAL_DM = ("dm (func.)", "d_dm_func")


@dataclass(frozen=True)
class Measure:
    """What a layer matrix or Table 1 scores a (front layer, end layer) pair by."""

    column: str
    objective: str | None  # the objective whose trials carry it; None: any trial
    larger_is_more_similar: bool
    for_identification: bool = True  # False: drawn as a matrix, left out of Table 1


def measures(objectives) -> dict[str, Measure]:
    """Every measure for results holding trials of `objectives`: each objective's relative accuracy, every
    index, and each objective's OOD AUROC (0.5: in distribution; not a similarity, so not in Table 1)."""
    out = {o: Measure("relative_acc", o, True) for o in objectives}
    out.update({e.label: Measure(e.column, None, e.larger_is_more_similar) for e in INDEX_ENTRIES})
    out.update({f"{o} ood auroc": Measure("ood_auroc", o, False, for_identification=False) for o in objectives})
    return out


def dissimilarities() -> dict[str, str]:
    """Tables 2-3: report label -> representation-test column, in table order."""
    out = {e.reptest_label: e.reptest_column for e in INDEX_ENTRIES if e.reptest_column}
    out[FUNCTIONAL_DM[0]] = FUNCTIONAL_DM[1]
    return out
