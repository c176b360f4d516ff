"""A tiny sweep under Ray with `--tracker mlflow:file://...` leaves one MLflow run per unit in the file store,
with the unit's row as metrics and parameters, readable by `mlflow.search_runs`; a second tracker that raises
on every unit fails none of them: every row is recorded."""

from __future__ import annotations

import pytest

from sweep.backends import trackers

pytestmark = [pytest.mark.ray, pytest.mark.slow]


class Raising(trackers.Tracker):
    def log(self, record: trackers.Record) -> None:
        raise ConnectionError("tracking server unreachable")


def test_an_mlflow_file_store_holds_one_run_per_unit(tiny_space, write_space, tmp_path, monkeypatch, capsys):
    mlflow = pytest.importorskip("mlflow")
    import analysis
    from sweep.cli import main
    from sweep.config.space import parse_space

    tiny_space["stitching"].update(stitch_points=["layer1.0"], objectives=["dm"])
    space = write_space(tiny_space)
    parse = trackers.parse
    monkeypatch.setattr(trackers, "parse", lambda specs, name: [*parse(specs, name), Raising()])
    store = f"file://{tmp_path / 'mlruns'}"
    code = main(
        ["run", str(space), "--storage", str(tmp_path / "results"), "--num-cpus", "2", "--tracker", f"mlflow:{store}"]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    sweep = parse_space(tiny_space)
    (trial,) = sweep.trials
    trials, donors = (
        analysis.load_trials(tmp_path / "results" / "tiny"),
        analysis.load_donors(tmp_path / "results" / "tiny"),
    )
    assert list(trials["trial_id"]) == [trial.trial_id] and (trials["status"] == "done").all()
    assert len(donors) == 1 and (donors["status"] == "done").all()
    assert out.count("note: tracker Raising:") == 2 and "unreachable" in out

    mlflow.set_tracking_uri(store)
    runs = mlflow.search_runs(experiment_names=["tiny"])
    assert sorted(runs["tags.kind"]) == ["donor", "trial"]
    row = runs[runs["tags.kind"] == "trial"].iloc[0]
    assert row["tags.mlflow.runName"] == trial.trial_id and row["status"] == "FINISHED"
    assert row["metrics.clean_acc"] == pytest.approx(float(trials["clean_acc"].iloc[0]), rel=1e-6)
    assert row["params.objective"] == "dm"
    donor = runs[runs["tags.kind"] == "donor"].iloc[0]
    assert donor["metrics.clean_acc"] == pytest.approx(float(donors["clean_acc"].iloc[0]), rel=1e-6)
    curve = [c for c in runs.columns if c.startswith("metrics.curve/")]
    assert curve and donor[curve].notna().all(), "the donor's training curves, by epoch"
