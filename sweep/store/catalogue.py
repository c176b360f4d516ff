"""The measures that results record and reports read: one entry per similarity index, written once.

Torch-free, so that both sides read it. The Parquet columns an index writes (trials, and representation tests)
come from its entry here (`schema.py` derives them), and the reports take names, columns and directions from it
(`tables.py`: the layer matrices and Table 1; `stats.py`: Tables 2-3). Each shipped index writes its entry in its
own module (`sweep/measures/indices/cka.py`, ...), beside its function, through `register_index`; the catalogue
imports those modules the first time it is read (`Registry(populate=...)`), and they import no PyTorch. The
stitching objectives' own measures (relative accuracy, OOD AUROC per objective) are derived from the objectives
present in the results, so no objective name is written here either.

An index a user adds in their own module registers its entry in `INDEX_CATALOGUE` (through `register_index`),
and every table and chart that reads the catalogue picks it up. A reader that has not imported that module
still keeps the extra columns of the parts (`analysis.load`), so nothing written is lost.
"""

from __future__ import annotations

from dataclasses import dataclass

from sweep.registry import Registry

KINDS = ("similarity", "distance", "rank")
DTYPES = ("float64", "int32")
# Where an index may be used: "trial" (`stitching.indices`: a trials column per stitch point), "reptest" (a
# representation test's `indices`: its dissimilarity column), "similarity" (a `similarity:` entry's `measure`,
# computed on whole activation matrices; it writes its column in the similarity table, never in trials).
SCOPES = ("trial", "reptest", "similarity")


@dataclass(frozen=True)
class IndexEntry:
    """A similarity index between f<=i and g<=j, as the results record it.

    `kind`: "similarity" (larger: more alike), "distance" (smaller: more alike), or "rank" (one value per
    side, no direction). A similarity or distance writes one trials column; a rank index one per side.
    `reptest_column`: its dissimilarity d(A, B) in representation tests (1 - s for a similarity, the value
    itself for a distance); None when the index takes no part in them.
    `scopes`: where it may be used (`SCOPES`); None: "trial", and "reptest" when it has a `reptest_column`. An
    index of scope "similarity" only writes `columns` in the similarity table, not in trials or reptests."""

    index: str  # its name in a search space (`indices:`)
    columns: tuple[str, ...]  # the trials columns it writes
    label: str  # its name in reports
    kind: str = "similarity"
    dtype: str = "float64"  # of its columns
    reptest_column: str | None = None
    reptest_label: str | None = None
    description: str = ""
    scopes: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.scopes is None:  # frozen: the default is filled in once
            object.__setattr__(self, "scopes", ("trial",) + (("reptest",) if self.reptest_column else ()))
        if not self.scopes or any(s not in SCOPES for s in self.scopes):
            raise ValueError(f"index {self.index!r}: scopes must be some of {SCOPES}, found {self.scopes!r}")
        if ("reptest" in self.scopes) != bool(self.reptest_column):
            raise ValueError(f"index {self.index!r}: scope 'reptest' goes with a reptest_column, found {self!r}")
        if self.kind not in KINDS:
            raise ValueError(f"index {self.index!r}: kind must be one of {KINDS}, found {self.kind!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"index {self.index!r}: dtype must be one of {DTYPES}, found {self.dtype!r}")
        if self.kind != "rank" and len(self.columns) != 1:
            raise ValueError(f"index {self.index!r}: a {self.kind} writes one column, found {self.columns}")
        if self.reptest_column and self.kind == "rank":
            raise ValueError(f"index {self.index!r}: a rank index has no dissimilarity for representation tests")

    @property
    def column(self) -> str:
        return self.columns[0]

    @property
    def larger_is_more_similar(self) -> bool | None:
        return {"similarity": True, "distance": False}.get(self.kind)

    @property
    def is_pair_measure(self) -> bool:
        """Scores a (front, end) pair by one number with a direction: a layer matrix and Table 1 can use it."""
        return self.kind != "rank" and "trial" in self.scopes

    @property
    def similarity_column(self) -> str:
        """Its column in the similarity table (scope "similarity"): its name where it also writes trials
        columns (`cka`, `opd`), else its own column."""
        return self.index if self.in_trials else self.column

    @property
    def in_trials(self) -> bool:
        """It writes trials columns (`stitching.indices` may request it)."""
        return "trial" in self.scopes


# Filled by the indices' own modules (`sweep.measures.indices`, named here, imported on first read: the store
# imports nothing of the engine's layers above it, and reading the catalogue imports no PyTorch).
INDEX_CATALOGUE: Registry[IndexEntry] = Registry("similarity index", populate="sweep.measures.indices")


def add_entry(entry: IndexEntry) -> IndexEntry:
    """Register `entry` (a name may be registered once, and no two entries may write the same column)."""
    taken = {c: e.index for e in INDEX_CATALOGUE.values() for c in (*e.columns, e.reptest_column) if c}
    clash = [c for c in (*entry.columns, entry.reptest_column) if c in taken]
    if clash:
        raise ValueError(f"index {entry.index!r}: column {clash[0]!r} is already written by {taken[clash[0]]!r}")
    return INDEX_CATALOGUE.add(entry.index, entry)


# Representation tests also score functional DM: 1 - the relative accuracy of B stitched into A's network.
FUNCTIONAL_DM = ("dm (func.)", "d_dm_func")


def pair_entries() -> list[IndexEntry]:
    return [e for e in INDEX_CATALOGUE.values() if e.is_pair_measure]


def similarity_measures() -> list[str]:
    """The indices a `similarity:` entry's `measure` may name: those of scope "similarity"."""
    return [e.index for e in INDEX_CATALOGUE.values() if "similarity" in e.scopes]


def reptest_indices() -> list[str]:
    """The indices a representation test may request: those with a dissimilarity column."""
    return [e.index for e in INDEX_CATALOGUE.values() if e.reptest_column]


@dataclass(frozen=True)
class Measure:
    """What a layer matrix or Table 1 scores a (front layer, end layer) pair by."""

    column: str
    objective: str | None  # the objective whose trials carry it; None: any trial
    larger_is_more_similar: bool
    for_identification: bool = True  # False: drawn as a matrix, left out of Table 1


def measures(objectives) -> dict[str, Measure]:
    """Every measure for results holding trials of `objectives`: each objective's relative accuracy, every
    pair index, and each objective's OOD AUROC (0.5: in distribution; not a similarity, so not in Table 1)."""
    out = {o: Measure("relative_acc", o, True) for o in objectives}
    out.update({e.label: Measure(e.column, None, e.larger_is_more_similar) for e in pair_entries()})
    out.update({f"{o} ood auroc": Measure("ood_auroc", o, False, for_identification=False) for o in objectives})
    return out


def dissimilarities() -> dict[str, str]:
    """Tables 2-3: report label -> representation-test column, in table order."""
    out = {e.reptest_label or e.label: e.reptest_column for e in INDEX_CATALOGUE.values() if e.reptest_column}
    out[FUNCTIONAL_DM[0]] = FUNCTIONAL_DM[1]
    return out
