"""Every folder and file name of a sweep's results, in one place: the engine writes there, `analysis` reads
there, and nothing else spells a name out.

Layout under the storage root:
    <root>/zoo/<donor_key>/model.pt        cached donor checkpoints, shared by every sweep under this root
    <root>/<sweep>/space.yaml              the search space the sweep was started with
    <root>/<sweep>/trials/<trial_id>.parquet   one row per trial (done or failed)
    <root>/<sweep>/curves/<trial_id>.parquet   long format: trial_id, epoch, metric, value
    <root>/<sweep>/donors/<name>-<eval_id>.parquet   one row per donor and evaluation setting
    <root>/<sweep>/<table>/<unit_id>.parquet   the other kinds of work (`tables()`)
    <root>/<sweep>/<table>/@compacted-<ns>-<hex>.parquet   done parts compacted into one file (`compact.py`)
    <root>/<sweep>/inverted/<unit_id>/     an inversion unit's images: shard-00000.npz, ... and index.npz
                                           (written before its part; `<unit_id>.npz` before shards existed)
    <root>/<sweep>/stitchers/<trial_id>.pt  a trial's fitted stitcher (written before its part)
    <root>/<sweep>/_snapshot/<table>.snapshot  the reader's snapshot of a table (Parquet; `sweep.store.snapshot`)
    <root>/<sweep>/_ray/                   Ray's records of a run (removed after a clean one)
"""

from __future__ import annotations

from pathlib import Path

from sweep.store.storage import Loc, child_uri, open_root

SPACE_FILE = "space.yaml"
ZOO_DIR = "zoo"  # beside the sweeps, under the root
CHECKPOINT_FILE = "model.pt"  # a donor's checkpoint in its zoo folder
RAY_DIR = "_ray"
SET_ASIDE_DIR = "_set_aside"  # <UTC time>/<table>/<part>.kept: parts `run --rerun` moved out of the tables
STALE_DIR = "_stale"  # <table>/<part>.kept: parts of units no longer in the sweep's space (kept, not read)
KEPT_SUFFIX = ".kept"  # a part kept out of the tables: still Parquet, named so that `**/*.parquet` skips it
CURRENT_FILE = "current.json"  # table -> the part names of the units of the space `run` last kept
SNAPSHOT_DIR = "_snapshot"  # <table>.snapshot: every file's rows at the last snapshot, each with its part's name
INVERTED_DIR = "inverted"  # <unit_id>/: the inverted images in shards, and their index (not a table)
INVERTED_INDEX = "index.npz"
RECORD_DIR = "_cache_keys"  # <host>-<pid>-<token>.json: the node-cache files a worker process used
STITCHERS_DIR = "stitchers"  # <trial_id>.pt: a trial's fitted stitcher (not a table)

# The results tables, one folder of Parquet parts each: each kind of work's (`Kind.table`, named in its package),
# and these. The trials' and donors' are named here too: the store's own tables below key on them.
TRIALS_DIR = "trials"
DONORS_DIR = "donors"
CURVES_DIR = "curves"
DONOR_CURVES_DIR = "donor_curves"
ENERGIES_DIR = "energies"
# The tables the store keeps itself, beside each kind of work's (`Kind.table`): the trials' training curves and
# energies, the donors' curves; each with the column naming a row's unit.
STORE_TABLE_KEYS = {CURVES_DIR: "trial_id", DONOR_CURVES_DIR: "donor_key", ENERGIES_DIR: "trial_id"}
PART_SUFFIX = ".parquet"


def table_kinds() -> list:
    """The registered kinds of work that declare their table (read lazily: the registry fills itself from
    declarations that import no PyTorch)."""
    from sweep.registry import KINDS

    return [k for k in KINDS.values() if k.schema is not None]


def tables() -> tuple[str, ...]:
    """Every results table: each kind's (registration order), then the store's own (`STORE_TABLE_KEYS`)."""
    return tuple(dict.fromkeys([k.table for k in table_kinds()] + list(STORE_TABLE_KEYS)))


def key_column(table: str) -> str:
    """The column naming a row's unit in `table` (every part has it)."""
    owner = next((k for k in table_kinds() if k.table == table), None)
    return owner.key if owner else STORE_TABLE_KEYS[table]


def inverted_folder(results: Loc, unit_id: str) -> Loc:
    """An inversion unit's folder of shards and index."""
    return results / INVERTED_DIR / unit_id


def inverted_legacy(results: Loc, unit_id: str) -> Loc:
    """Where results written before shards keep a unit's images."""
    return results / INVERTED_DIR / f"{unit_id}.npz"


def inverted_shard(results: Loc, unit_id: str, k: int) -> Loc:
    """Shard `k` of an inversion unit's images."""
    return inverted_folder(results, unit_id) / f"shard-{k:05d}.npz"


class SweepDir:
    """Locations of one sweep's results (`<root>/<sweep>`); `root` is a local folder or a pyarrow.fs URI."""

    def __init__(self, root: str | Path | Loc, name: str, uri: str | None = None) -> None:
        self.root = open_root(root)
        self.name = name
        self.path = self.root / name
        # What a user types to reach this sweep (`stitchsweep resume URI`): a URI keeps its query options.
        self.uri = uri or (child_uri(root, name) if isinstance(root, str) else str(self.path))

    @property
    def trials(self) -> Loc:
        return self.path / TRIALS_DIR

    @property
    def curves(self) -> Loc:
        return self.path / CURVES_DIR

    @property
    def donors(self) -> Loc:
        return self.path / DONORS_DIR

    @property
    def space(self) -> Loc:
        return self.path / SPACE_FILE

    @property
    def ray(self) -> Loc:
        return self.path / RAY_DIR

    def zoo(self, donor_key: str) -> Loc:
        return self.root / ZOO_DIR / donor_key

    def checkpoint(self, donor_key: str) -> Loc:
        """A donor's cached checkpoint in the zoo."""
        return self.zoo(donor_key) / CHECKPOINT_FILE

    def trial_part(self, trial_id: str) -> Loc:
        return self.trials / f"{trial_id}{PART_SUFFIX}"

    def curve_part(self, trial_id: str) -> Loc:
        return self.curves / f"{trial_id}{PART_SUFFIX}"

    def donor_part(self, donor_name: str, eval_id: str) -> Loc:
        """A donor's row for one evaluation setting."""
        return self.donors / f"{donor_name}-{eval_id}{PART_SUFFIX}"

    def table(self, name: str) -> Loc:
        """The folder of results table `name` (`tables()`)."""
        return self.path / name

    def part(self, table: str, unit_id: str) -> Loc:
        return self.table(table) / f"{unit_id}{PART_SUFFIX}"

    def stitcher(self, trial_id: str) -> Loc:
        """A trial's fitted stitcher (and the donors' moved BatchNorm statistics), written before its part."""
        return self.path / STITCHERS_DIR / f"{trial_id}.pt"

    def inverted(self, unit_id: str) -> Loc:
        """An inversion unit's images: a folder of shards and an index (`sweep.store.inverted`)."""
        return inverted_folder(self.path, unit_id)

    def create(self, names: list[str] | tuple[str, ...] = ()) -> None:
        """Make the sweep's folder and those of the tables `names` (the kinds with units: a table's folder is
        otherwise made by its first part, so no table a sweep never writes has a folder)."""
        self.path.mkdir()
        for name in names:
            self.table(name).mkdir()

    def temporary_folders(self) -> tuple[Loc, ...]:
        """Every folder a writer may leave a temporary file in: the tables, the files beside them, the workers'
        cache records, the zoo."""
        files = (self.path / INVERTED_DIR, self.path / STITCHERS_DIR, self.path / RECORD_DIR, self.root / ZOO_DIR)
        return (*(self.table(name) for name in tables()), *files)
