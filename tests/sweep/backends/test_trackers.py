"""Trackers mirror a unit's parts: the record holds the part's columns (numbers as metrics, the rest as
parameters) and the donor's curves by epoch; a tracker that raises is a note, never an error; a bad
`--tracker` is refused naming the option. The real MLflow store under Ray: `test_trackers_ray.py`."""

from __future__ import annotations

import sys
import types

import pyarrow.parquet as pq
import pytest

from sweep.backends import trackers
from sweep.config.errors import SpecError
from sweep.store.layout import DONOR_CURVES_DIR, SweepDir

SPACE = """
name: tiny
data: {dataset: digits, train_size: 64, val_size: 16, test_size: 32}
donors:
  a: {arch: resnet_tiny, training: plain, epochs: 3, lr: 0.1, seed: 0}
"""


class Kept(trackers.Tracker):
    def __init__(self) -> None:
        self.records: list[trackers.Record] = []

    def log(self, record: trackers.Record) -> None:
        self.records.append(record)


class Raising(trackers.Tracker):
    def log(self, record: trackers.Record) -> None:
        raise ConnectionError("tracking server unreachable")


@pytest.fixture
def donor_unit(tmp_path):
    """The donor kind, its one unit and a results folder with its part and curves (the store's own writer)."""
    import yaml

    from sweep.config.space import parse_space
    from sweep.registry import KINDS
    from tests.synthetic import synthetic_results

    space = tmp_path / "tiny.yaml"
    space.write_text(SPACE)
    synthetic_results(space, tmp_path / "root" / "tiny")
    sweep_dir = SweepDir(tmp_path / "root", "tiny")
    kind = KINDS["donor"]
    ((uid, unit),) = kind.units(parse_space(yaml.safe_load(SPACE))).items()
    # the synthetic writer puts every row in one part: give the unit its own, as the donor kind names it
    (part,) = kind.parts(sweep_dir, unit)
    rows = pq.read_table(tmp_path / "root" / "tiny" / "donors" / "synthetic.parquet")
    part.write_parquet(rows)
    key = rows.to_pylist()[0]["donor_key"]
    sweep_dir.part(DONOR_CURVES_DIR, key).write_parquet(
        pq.read_table(tmp_path / "root" / "tiny" / DONOR_CURVES_DIR / "synthetic.parquet")
    )
    return kind, uid, unit, sweep_dir, part


def test_a_record_holds_the_part_and_the_curves(donor_unit):
    kind, uid, unit, sweep_dir, part = donor_unit
    (row,) = part.read_parquet().to_pylist()
    rec = trackers.record(kind, uid, unit, sweep_dir)
    assert rec.name == uid and rec.tags["kind"] == "donor" and rec.tags["sweep"] == "tiny"
    numbers = {k: v for k, v in row.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    assert {k: p for k, p in rec.metrics.items() if not k.startswith("curve/")} == {
        k: [(0, float(v))] for k, v in numbers.items()
    }
    assert rec.params == {k: str(v) for k, v in row.items() if k not in numbers and v is not None}
    curves = pq.read_table(sweep_dir.part(DONOR_CURVES_DIR, row["donor_key"]).path).to_pylist()
    logged = sorted(
        (m[len("curve/") :], e, v) for m, pts in rec.metrics.items() if m.startswith("curve/") for e, v in pts
    )
    assert logged == sorted((c["metric"], c["epoch"], c["value"]) for c in curves) and logged


def test_a_tracker_that_raises_is_a_note_and_the_others_still_log(donor_unit):
    kind, uid, unit, sweep_dir, _ = donor_unit
    kept = Kept()
    notes = trackers.log_unit([Raising(), kept], kind, uid, unit, sweep_dir)
    assert len(notes) == 1 and "unreachable" in notes[0] and uid in notes[0]
    assert [r.name for r in kept.records] == [uid]


def test_wandb_gets_one_run_per_unit_with_its_steps(donor_unit, monkeypatch):
    """W&B through a stand-in module with wandb's `init` / `log` / `finish` calls (the real package is not a
    dependency): what the tracker sends."""
    kind, uid, unit, sweep_dir, _ = donor_unit
    runs = []

    class Run:
        def __init__(self, **kw):
            self.init, self.logged, self.finished = kw, [], False

        def log(self, data, step):
            self.logged.append((step, data))

        def finish(self):
            self.finished = True

    fake = types.SimpleNamespace(init=lambda **kw: runs.append(Run(**kw)) or runs[-1])
    monkeypatch.setitem(sys.modules, "wandb", fake)
    (tracker,) = trackers.parse(["wandb:lab"], "tiny")
    assert trackers.log_unit([tracker], kind, uid, unit, sweep_dir) == []
    (run,) = runs
    rec = trackers.record(kind, uid, unit, sweep_dir)
    assert run.finished and run.init["project"] == "lab" and run.init["name"] == uid and run.init["group"] == "tiny"
    assert run.init["config"] == rec.params
    sent = {(k, s, v) for s, data in run.logged for k, v in data.items()}
    assert sent == {(k, s, v) for k, pts in rec.metrics.items() for s, v in pts}
    assert [s for s, _ in run.logged] == sorted({s for s, _ in run.logged})


@pytest.mark.parametrize("spec", ["mlflow", "neptune:x", "wandb:", "mlflow:"])
def test_a_bad_tracker_is_refused_naming_the_option(spec):
    with pytest.raises(SpecError, match="--tracker"):
        trackers.parse([spec], "tiny")
