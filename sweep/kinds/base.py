"""What a kind of work is: one registered `Kind` entry, which the planner and every backend handle alike.

A kind (donors, stitching trials, representation-test units, ...) says how a validated sweep expands into its
units (frozen, hashed specs, keyed by a stable id), which Parquet parts record a unit (a unit is done when all
of them say "done"), and how one unit runs: pure PyTorch, idempotent (a unit whose parts exist is skipped),
writing its parts last. The planner (`sweep.planning.planning`) and the Ray backend read only these entries, so adding
a kind is one new module here that calls `register_kind`, and no existing kind or backend changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sweep.registry import KINDS, resolve  # noqa: F401  (resolve: a kind's `run` and hooks)

if TYPE_CHECKING:
    import torch

    from sweep.config.space import Sweep
    from sweep.store.results import Loc, SweepDir


@dataclass(frozen=True)
class RunContext:
    """Where and how a unit runs: the sweep's results folder, the device, the data, and a progress callback
    (`report(metrics)`: the backend shows it; Ray Tune forwards it to the driver)."""

    sweep_dir: SweepDir
    device: torch.device
    data_root: str | None = None
    download: bool = True
    report: Callable[[dict], None] = field(default=lambda metrics: None)


@dataclass(frozen=True)
class Kind:
    """A kind of work.

    Its search-space section (`section`, the top-level key) is parsed by `parse(raw, ctx) -> units` (frozen,
    hashed specs; `ctx` is `sweep.config.context.SpaceContext`: data, evaluation, donors) and the units are kept
    in `Sweep.units[name]`, each named by `unit_id(unit)`. A kind without a section (donors) says how to find
    its units itself (`units(sweep)`: unit id -> unit). Units must be picklable: the backend ships them.
    `parts(sweep_dir, unit)`: the Parquet parts that record a unit; `run(unit, ctx)`: run it, returning at
    least {"status", "error"} (and any metrics worth a progress line; `run` may name its function,
    "module:function", which `resolve` imports); `label(unit)`: a short name for progress lines;
    `describe(unit)`: the line `stitchsweep plan --trials` prints (default: the unit id and label);
    `group(unit)`: the line `plan`'s summary counts it under (default: every unit its own line). The backend
    runs the kinds in registration order, a kind after those named in `after` (it reads their parts)."""

    name: str  # "donor", "trial", ...
    stage: str = ""  # the name of its stage in progress lines and Ray's run records (default: its name)
    noun: str = ""  # plural, for counts: "donors", "trials", ... (default: "<name> units")
    table: str = ""  # the results table its parts feed (`sweep.store.schema`; default: its name)
    # the Parquet parts that record a unit (default: one part in its table, named by the unit's id)
    parts: Callable[[SweepDir, Any], list[Loc]] | None = None
    # the function that runs a unit, or its name "package.module:function", imported when a unit runs (so
    # that planning never imports a kind's work: PyTorch and the rest)
    run: Callable[[Any, RunContext], dict] | str | None = None
    label: Callable[[Any], str] | None = None  # default: the unit's `label`
    section: str | None = None
    parse: Callable[[Any, Any], tuple] | None = None
    unit_id: Callable[[Any], str] | None = None  # default, with a section: the unit's `unit_id`
    find_units: Callable[[Sweep], dict[str, Any]] | None = None  # for a kind without a section
    # the fields of one entry of its section (`sweep.config.fields.Option`): the space language's generators
    # and the JSON Schema read them
    options: dict | None = None
    describe: Callable[[Any], str] | None = None
    group: Callable[[Any], str] | None = None  # `plan`'s summary: units of one group are counted together
    donors: Callable[[Any], tuple[str, ...]] | None = None  # the donor refs a unit reads: a failed one blocks it
    after: tuple[str, ...] = ()
    # A sort key of units that share expensive state (a donor, a point): the backend runs them consecutively.
    locality: Callable[[Any], tuple] | None = None
    # The frozen halves (donor, point) whose activations a unit computes through the worker cache: a stage
    # writes them to the node's cache folder only when two of its units read one (`shares_halves`).
    halves: Callable[[Any], tuple[tuple, ...]] | None = None
    # The frozen halves (donor key, point) a unit leaves on its node besides those it reads: the donor stage's
    # fills. On a cluster of several nodes a unit runs on the node holding its halves (`sweep.backends.placement`).
    leaves: Callable[[Any], tuple[tuple, ...]] | str | None = None
    rerun_failed: bool = False  # a failed unit is tried again by every run (else only with --failed)
    # Optional hooks: everything else the engine and the analysis know of a kind. Each may be the callable or
    # its name, "package.module:name" (`resolve`), imported when used, so that declaring a kind imports
    # neither PyTorch nor the report's plotting.
    # its table: `schema`, the pyarrow schema of its rows or a function returning it (`sweep.store.schema`
    # reads it; None: the kind's table is not one of the results tables), `key`, the column naming a row's
    # unit, `timing`, the column of a unit's recorded seconds (`plan --estimate` scales its prediction by
    # them; None: not used)
    schema: Any = None
    key: str = "unit_id"
    timing: str | None = "time_unit_s"
    # `memory(unit, sweep)`: the unit's memory need (`sweep.costs.memory.Need`, or None: nothing sized), that `plan`
    # prints and `resources.memory_per_trial` bounds
    memory: Callable[[Any, Any], Any] | str | None = None
    # `held(unit, sweep)`: the frozen halves' activations a unit keeps through the worker cache (its `halves` on
    # its images), {what names a part in the cache: bytes}, that `plan` and `run` count in its worker memory, each
    # part once across the units a worker runs, within the cache's budget (`sweep.planning.worker_memory`); None:
    # none kept
    held: Callable[[Any, Any], dict] | str | None = None
    # `working(unit, sweep)`: the bytes a unit allocates and frees in a batch on the CPU (a fit's activations and
    # gradients, an evaluation's forward: `sweep.costs.working`), that `plan` and `run` count in its worker memory
    # when units run on the CPU; None: nothing beyond its `memory` need
    working: Callable[[Any, Any], int] | str | None = None
    # `price(unit, pricer)`: its device-seconds under a cost profile (`sweep.costs.pricer.Pricer`); None: listed as
    # not priced by `plan --estimate`
    price: Callable[[Any, Any], float] | str | None = None
    # `report()`: the report's chart sections of its table (`analysis.report.sections.ChartSection`s), drawn after
    # the shared ones; their `data(report_data)` reads the table as `report_data.table(kind.table)`
    report: Callable[[], list] | str | None = None
    # `after_stage(sweep, sweep_dir)`: lines the backend prints when its stage has run (e.g. donors at chance)
    after_stage: Callable[[Any, Any], list[str]] | str | None = None
    # `disk(unit)`: (what, bytes): the bulk a unit writes to the results storage beside its parts (inverted
    # images), and the line `plan` counts it under (e.g. "28 px, uint8"); None: nothing counted
    disk: Callable[[Any], tuple[str, int]] | str | None = None
    # What a unit reads of its donors that their evaluation's pass computes once, for every unit (the donor
    # stage's work): `predictions(unit)`, the donor refs whose predictions on its test images it reads;
    # `fills(unit)`, (donor ref, `sweep.kinds.donor.units.HalfFill`) for each frozen half it reads there
    predictions: Callable[[Any], Any] | str | None = None
    fills: Callable[[Any], Any] | str | None = None
    # `side_parts(sweep_dir, unit)`: the parts of the store's own tables (`sweep.store.schema.STORE_TABLES`: training
    # curves, energies) a unit may write beside its own: kept with it when the space changes, read by trackers
    side_parts: Callable[[Any, Any], list] | str | None = None
    # `epochs(unit)`: the (donor key, epoch) checkpoints of donors' kept epochs a unit reads (`du` keeps them)
    epochs: Callable[[Any], Any] | str | None = None

    def __post_init__(self) -> None:
        """The defaults that follow from the name and the section (a frozen dataclass: set once, here)."""
        if self.run is None:
            raise ValueError(f'kind {self.name!r}: give its `run` (a function or its "module:function" name)')
        defaults = {
            "stage": self.stage or self.name,
            "noun": self.noun or f"{self.name} units",
            "table": self.table or self.name,
            "label": self.label or _own_label,
            "unit_id": self.unit_id or (_own_id if self.section is not None else None),
            "parts": self.parts or _one_part(self.table or self.name),
        }
        for name, value in defaults.items():
            object.__setattr__(self, name, value)

    def shares_halves(self, units) -> bool:
        """Whether two of `units` read the same frozen half: only then are its activations worth the node's
        cache files (other workers, and later commands, may read them); a half no other unit of the stage
        reads is computed and kept in the worker's memory, not written (a kind that declares no `halves`:
        always written)."""
        if self.halves is None:
            return True
        seen: set = set()
        for unit in units:
            for half in dict.fromkeys(self.halves(unit)):
                if half in seen:
                    return True
                seen.add(half)
        return False

    def units(self, sweep: Sweep) -> dict[str, Any]:
        """Unit id -> unit, in the order the space lists them (a unit listed twice is one unit)."""
        if self.find_units is not None:
            return self.find_units(sweep)
        return {self.unit_id(u): u for u in sweep.units.get(self.name, ())}

    def line(self, unit) -> str:
        return self.describe(unit) if self.describe else f"{self.unit_id(unit)}  {self.label(unit)}"


def _own_label(unit) -> str:
    return unit.label


def _own_id(unit) -> str:
    return unit.unit_id


@dataclass(frozen=True)
class _one_part:
    """A unit's one part in `table`, named by its id (picklable, as the kind's entry travels to workers)."""

    table: str

    def __call__(self, sweep_dir: SweepDir, unit) -> list[Loc]:
        return [sweep_dir.part(self.table, unit.unit_id)]


def register_kind(kind: Kind, version: str | None = None) -> Kind:
    """Register a kind of work (`version`: a string to bump when its code changes what it computes; default:
    its plugin module's)."""
    if (kind.section is None) == (kind.find_units is None) or kind.section and not (kind.parse and kind.unit_id):
        raise ValueError(f"kind {kind.name!r}: give a section with its parse and unit_id, or find_units")
    missing = [k for k in kind.after if k not in KINDS._entries]
    if missing:
        raise ValueError(f"kind {kind.name!r} runs after {missing}, which are not registered before it")
    return KINDS.add(kind.name, kind, version)


def exiting() -> bool:
    """Whether this process has begun to exit while a unit runs in another thread (a Ray worker told to exit
    when its driver is gone, or a SLURM job cancelled): the interpreter's shutdown runs the threading atexit
    calls (thread pools then refuse work: "cannot schedule new futures after interpreter shutdown") before it
    marks its main thread stopped. A unit that fails then was interrupted, not failed: it must write nothing
    and stay pending."""
    import threading

    return bool(getattr(threading, "_SHUTTING_DOWN", False)) or not threading.main_thread().is_alive()


def not_a_failure(exc: BaseException) -> None:
    """Raise what a unit's code raised when it is no failure of the unit, to go past the unit's record: a full
    disk (`DiskFull`, raised as itself however it was wrapped: nothing could record it, the driver stops the run
    in one line and `resume` runs the unit once space is freed), an object store that kept failing
    (`StoreUnavailable`: Tune retries the unit), or anything while the process is exiting (`exiting`). Returns
    otherwise: the caller records the unit failed."""
    from sweep.store.retry import StoreUnavailable
    from sweep.store.storage import disk_full_in

    seen, chain = set(), exc  # an object store that kept failing: the store's fault, the unit stays pending
    while chain is not None and id(chain) not in seen:
        if isinstance(chain, StoreUnavailable):
            raise chain
        seen.add(id(chain))
        chain = chain.__cause__ or chain.__context__
    full = disk_full_in(exc)
    if full is exc or (full is None and exiting()):
        raise exc
    if full is not None:  # wrapped, or a plain OSError of a full disk (a write outside the store's)
        raise full from (None if full.__traceback__ else exc)


def failure(exc: BaseException) -> str:
    """The `error` a failed unit records: the exception's type and message, and the plugin file and line it
    came from (`sweep.config.failures.describe_failure`)."""
    from sweep.config.failures import describe_failure

    return describe_failure(exc)


def commit(part: Loc, rows: list[dict], schema, failed: dict) -> list[dict]:
    """Write `rows` as the unit's part, last (the commit marker); when they cannot be written (a value that does
    not fit its column: a plugin index that returned an array), write the one row `failed` instead, with the
    reason, so that the unit is recorded failed once rather than raising (which Ray would take for a lost
    worker and retry). Returns the rows written. A full disk or a process that is exiting writes nothing and
    raises (`not_a_failure`)."""
    from sweep.store.results import write_rows

    try:
        write_rows(part, rows, schema)
        return rows
    except Exception as exc:
        not_a_failure(exc)  # a full disk, an exiting process: raised
        rows = [dict(failed, status="failed", error=f"writing its row: {failure(exc)}")]
    write_rows(part, rows, schema)  # only the columns every failed row has: an error here is the engine's
    return rows


def record_once(ctx: RunContext, table: str, spec, base: dict, measure: Callable[[], list[dict]]) -> dict:
    """A unit's one part: {"status": "skipped"} where it is written already, else `measure`'s rows recorded with
    the `base` columns (`record_unit`)."""
    part = ctx.sweep_dir.part(table, spec.unit_id)
    if part.exists():
        return {"status": "skipped"}
    return record_unit(part, table, base, measure)


def unit_columns(spec, sweep_name: str, **columns) -> dict:
    """The columns a kind's rows start with: the unit's id, its sweep and its entry's name; then `columns`."""
    return dict(unit_id=spec.unit_id, sweep=sweep_name, name=spec.name or None, **columns)


def record_unit(
    part: Loc, table: str, base: dict, measure: Callable[[], list[dict]], timing: str = "time_unit_s"
) -> dict:
    """Run `measure` (a unit's rows) and write them, each with the `base` columns, as the unit's one Parquet
    part, last: status "done", or, when measuring or writing raises, one "failed" row with the error (the sweep
    goes on; nothing, and raised, on a full disk or when the process is exiting: `not_a_failure`). Adds the
    unit's wall time (column `timing`), the finishing time and the versions. Returns {"status", "error"}."""
    rows = record_rows(part, table, base, measure, timing)
    return {"status": rows[0]["status"], "error": rows[0].get("error")}


def record_rows(
    part: Loc, table: str, base: dict, measure: Callable[[], list[dict]], timing: str = "time_unit_s"
) -> list[dict]:
    """`record_unit`, returning the rows it wrote (a failed unit: its one failed row, `base` and the error)."""
    import time
    from datetime import datetime, timezone

    from sweep import __version__
    from sweep.store.schema import SCHEMA_VERSION, schema

    base = dict(base, stitchsweep_version=__version__, schema_version=SCHEMA_VERSION)
    t0 = time.perf_counter()
    try:
        rows = [dict(base, **r, status="done") for r in measure()]
    except Exception as exc:  # recorded; the sweep goes on
        not_a_failure(exc)
        rows = [dict(base, status="failed", error=failure(exc))]
    now = datetime.now(timezone.utc)
    for r in rows:
        r.update({timing: time.perf_counter() - t0, "finished_at": now})
    return commit(part, rows, schema(table), dict(base, **{timing: time.perf_counter() - t0, "finished_at": now}))


def run_recorded(kind: Kind, unit, ctx: RunContext) -> dict:
    """Run one unit of `kind` as a backend does: its `run`, and when that raises (a kind's own code, a
    plugin's above all, that does not record its failures), the unit recorded failed with the reason
    (`record_failed`), so that it is listed by `status` and rerun by `run --failed`, never retried as if its
    worker were lost. A full disk or a process that is exiting writes nothing and raises (`not_a_failure`)."""
    try:
        return resolve(kind.run)(unit, ctx)
    except Exception as exc:
        not_a_failure(exc)
        error = failure(exc)
    record_failed(kind, unit, ctx.sweep_dir, error)
    return {"status": "failed", "error": error}


def record_failed(kind: Kind, unit, sweep_dir: SweepDir, error: str) -> int:
    """Write each part of `unit` that does not exist as one failed row (its key, status and error; the other
    columns null): a unit whose run raised (`run_recorded`, on its worker) or whose worker was killed (from the
    driver, `sweep.backends.kills`). A part the unit wrote before it failed stands. Returns how many parts were
    written."""
    import pyarrow as pa

    from sweep.store.results import write_rows
    from sweep.store.schema import schema

    try:
        table = schema(kind.table)
    except Exception:  # a kind whose table is none of the results tables: the columns a status needs
        table = pa.schema([(kind.key, pa.string()), ("status", pa.string()), ("error", pa.string())])
    row = {"status": "failed", "error": error}
    if kind.key in table.names and table.field(kind.key).type == pa.string():  # a key of another type: the
        row[kind.key] = kind.unit_id(unit) if kind.unit_id else None  # unit itself names its row
    written = 0
    for part in kind.parts(sweep_dir, unit):
        if not part.exists():
            write_rows(part, [row], table)
            written += 1
    return written
