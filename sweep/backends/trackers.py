"""Opt-in copies of a sweep's records in an experiment tracker: MLflow, or Weights & Biases (offline with
`WANDB_MODE=offline`). The Parquet parts stay the record; a tracker only mirrors them.

The driver logs a unit once its trial has completed, from the unit's own parts (`Kind.parts`), so the tracker
holds exactly the rows `analysis.load` reads: one tracker run per unit, named by its unit id, tagged with its
kind and sweep, its text and flag columns as parameters and its numeric columns as metrics (a part of several
rows: one step per row), and the training curves of a donor (`donor_curves`) or trial (`curves`) as metrics
by epoch. A tracker that fails (not installed, unreachable, refusing a value) prints one note and is not asked
again for that unit: it never fails a unit, whose part is already written.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from sweep.config.errors import SpecError
from sweep.registry import resolve
from sweep.store.layout import CURVES_DIR, DONOR_CURVES_DIR, SweepDir
from sweep.store.storage import Loc

CURVE_TABLES = (CURVES_DIR, DONOR_CURVES_DIR)  # the store's tables of (epoch, metric, value) rows

TRACKERS = ("mlflow", "wandb")


@dataclass
class Record:
    """What one unit's run holds: its name, tags, parameters and metrics (name -> [(step, value), ...])."""

    name: str
    tags: dict[str, str]
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, list[tuple[int, float]]] = field(default_factory=dict)


class Tracker:
    """One tracker: `log(record)` makes one run of a unit's record."""

    def log(self, record: Record) -> None:
        raise NotImplementedError


class MLflowTracker(Tracker):
    """An MLflow tracking store (`file:///path` works offline); one experiment per sweep."""

    def __init__(self, uri: str, experiment: str) -> None:
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=uri)
        found = self.client.get_experiment_by_name(experiment)
        self.experiment_id = found.experiment_id if found else self.client.create_experiment(experiment)

    def log(self, record: Record) -> None:
        from mlflow.entities import Metric, Param

        run = self.client.create_run(self.experiment_id, run_name=record.name, tags=record.tags)
        rid = run.info.run_id
        params = [Param(k, v[:6000]) for k, v in record.params.items()]
        metrics = [Metric(k, v, 0, step) for k, points in record.metrics.items() for step, v in points]
        for start in range(0, max(len(params), len(metrics), 1), 100):  # MLflow's batch limit: 100 params
            self.client.log_batch(rid, metrics=metrics[start : start + 100], params=params[start : start + 100])
        self.client.set_terminated(rid)


class WandbTracker(Tracker):
    """Weights & Biases: one run per unit in `project` (`WANDB_MODE=offline` keeps it on disk, synced later
    with `wandb sync`)."""

    def __init__(self, project: str, sweep_name: str) -> None:
        import wandb

        self.wandb, self.project, self.group = wandb, project, sweep_name

    def log(self, record: Record) -> None:
        run = self.wandb.init(
            project=self.project, name=record.name, group=self.group, config=record.params,
            tags=[f"{k}={v}" for k, v in record.tags.items()], reinit="create_new",
        )  # fmt: skip
        try:
            steps: dict[int, dict[str, float]] = {}
            for name, points in record.metrics.items():
                for step, value in points:
                    steps.setdefault(step, {})[name] = value
            for step in sorted(steps):
                run.log(steps[step], step=step)
        finally:
            run.finish()


def parse(specs: Iterable[str], sweep_name: str) -> list[Tracker]:
    """`--tracker` values (`mlflow:URI`, `wandb:PROJECT`) as trackers; a bad one is a SpecError naming it."""
    out: list[Tracker] = []
    for spec in specs:
        kind, sep, where = spec.partition(":")
        if kind not in TRACKERS or not sep or not where:
            raise SpecError("--tracker", "mlflow:TRACKING_URI or wandb:PROJECT", spec)
        try:
            out.append(MLflowTracker(where, sweep_name) if kind == "mlflow" else WandbTracker(where, sweep_name))
        except ImportError as exc:
            extra = "pip install 'stitchsweep[tracking]'" if kind == "mlflow" else "pip install wandb"
            raise SpecError("--tracker", f"{kind} installed ({extra})", spec, str(exc)) from None
        except Exception as exc:  # a store that cannot be opened: refused before anything runs
            found = f"{type(exc).__name__}: {exc}"
            raise SpecError("--tracker", f"a {kind} store that can be opened", spec, found) from None
    return out


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _rows(parts: Iterable[Loc]) -> list[dict]:
    rows: list[dict] = []
    for part in parts:
        if part.exists():
            rows.extend(part.read_parquet().to_pylist())
    return rows


def record(kind, unit_id: str, unit, sweep_dir: SweepDir) -> Record | None:
    """A unit's record from its parts and curves (None when it wrote no part: nothing to mirror)."""
    rows = _rows(kind.parts(sweep_dir, unit))
    if not rows:
        return None
    out = Record(unit_id, {"kind": kind.name, "sweep": sweep_dir.name, "status": str(rows[0].get("status"))})
    for step, row in enumerate(rows):
        for k, v in row.items():
            number = _number(v)
            if number is not None:
                out.metrics.setdefault(k, []).append((step, number))
            elif v is not None and (len(rows) == 1 or k not in out.params):
                out.params[k] = str(v)
    side = resolve(kind.side_parts)(sweep_dir, unit) if kind.side_parts else []
    for curves in (p for p in side if p.parent.name in CURVE_TABLES):  # its training curves
        for row in _rows([curves]):
            value = _number(row.get("value"))
            if value is not None:
                out.metrics.setdefault(f"curve/{row['metric']}", []).append((int(row["epoch"]), value))
    return out


def log_unit(trackers: list[Tracker], kind, unit_id: str, unit, sweep_dir: SweepDir) -> list[str]:
    """Log one unit to every tracker; the notes of those that failed (never raised: the unit is recorded)."""
    notes = []
    try:
        rec = record(kind, unit_id, unit, sweep_dir)
    except Exception as exc:  # an unreadable part: `status` reports it; the tracker just skips the unit
        return [f"tracker: {unit_id} not logged: its part could not be read ({type(exc).__name__}: {exc})"]
    for tracker in trackers if rec is not None else []:
        try:
            tracker.log(rec)
        except Exception as exc:  # a tracker's failure is a note, never a failed unit
            notes.append(f"tracker {type(tracker).__name__}: {unit_id} not logged ({type(exc).__name__}: {exc})")
    return notes
