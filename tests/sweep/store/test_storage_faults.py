"""Bad storage, an address nobody answers at, and corrupt or foreign results parts."""

import dataclasses
import subprocess
import sys
import time
import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import analysis
from analysis.report.write import write_report
from sweep.cli import main
from sweep.config.space import parse_space
from sweep.planning.planning import progress
from sweep.store.results import SweepDir, write_rows
from sweep.store.schema import trial_schema


def test_unwritable_storage_is_refused_before_anything_runs(tiny_space, write_space, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    rc = main(["run", str(write_space(tiny_space)), "--storage", str(blocker / "results")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("stitchsweep: error: --storage: expected storage this user can write")
    assert "a-file" in err


def test_an_address_nobody_answers_at_fails_in_seconds_naming_it(tiny_space, write_space, tmp_path):
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweep",
            "run",
            str(write_space(tiny_space)),
            "--storage",
            str(tmp_path / "r"),
            "--address",
            "127.0.0.1:9",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "--address: expected the host:port of a running Ray cluster" in proc.stderr
    assert "127.0.0.1:9" in proc.stderr and time.perf_counter() - t0 < 60


def _results_with_bad_parts(tmp_path, tiny_space):
    sweep = parse_space(tiny_space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    good, bad = sweep.trials[0], sweep.trials[1]
    write_rows(
        sweep_dir.trial_part(good.trial_id),
        [
            dict(
                trial_id=good.trial_id,
                status="done",
                front="zoo:a",
                end="zoo:a",
                objective="dm",
                front_point="layer1.0",
                end_point="layer1.0",
                point_index=1,
                end_index=1,
                seed=0,
                clean_acc=0.9,
            )
        ],
        trial_schema(),
    )
    sweep_dir.trial_part(bad.trial_id).write_bytes(b"PAR1 truncated")  # a writer killed without the rename
    pq.write_table(pa.table({"x": [1, 2]}), sweep_dir.trials / "foreign.parquet")  # someone else's file
    return sweep, sweep_dir, good, bad


def test_readers_skip_bad_parts_by_path_and_never_crash(tmp_path, tiny_space):
    _, sweep_dir, good, bad = _results_with_bad_parts(tmp_path, tiny_space)
    with pytest.warns(UserWarning, match=bad.trial_id):
        trials = analysis.load_trials(sweep_dir.path)
    assert list(trials["trial_id"]) == [good.trial_id]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # load() reports through "problems", not warnings
        tables = analysis.load(sweep_dir.path)
    problems = tables["problems"]
    assert sorted(p.rsplit("/", 1)[1] for p in problems["path"]) == sorted(
        [f"{bad.trial_id}.parquet", "foreign.parquet"]
    )
    assert "no 'trial_id' column" in problems[problems["path"].str.endswith("foreign.parquet")]["error"].iloc[0]
    index = write_report(sweep_dir.path, tmp_path / "report")
    assert "Unreadable results parts" in index.read_text() and (tmp_path / "report" / "problems.csv").exists()


def test_run_sets_an_unreadable_trial_part_aside_and_reruns_the_trial(tmp_path, tiny_space, capsys):
    sweep, sweep_dir, good, bad = _results_with_bad_parts(tmp_path, tiny_space)
    looked = progress(sweep, sweep_dir)["trial"]  # status and report only look: nothing renamed
    assert bad.trial_id in looked.pending and sweep_dir.trial_part(bad.trial_id).exists()
    assert "counted as missing" in capsys.readouterr().out
    trials = progress(sweep, sweep_dir, repair=True)["trial"]  # what run / resume do
    out = capsys.readouterr().out
    assert bad.trial_id in trials.pending and good.trial_id not in trials.pending and trials.done == [good.trial_id]
    assert f"unreadable results part {sweep_dir.trial_part(bad.trial_id)}" in out
    assert not sweep_dir.trial_part(bad.trial_id).exists()
    assert (sweep_dir.trials / f"{bad.trial_id}.parquet.corrupt").exists()  # kept for inspection


def _a_worker_without_the_data_stops_the_run(checks, tmp_path):
    """On a cluster the data check runs as a task on a worker (its data root, not the driver's)."""
    import copy

    from sweep.config.errors import SpecError
    from tests.conftest import TINY_SPACE

    space = copy.deepcopy(TINY_SPACE)
    space["data"] = {"dataset": "mnist", "root": str(tmp_path / "nodata"), "train_size": 100, "test_size": 50}
    sweep = parse_space(space)
    with pytest.raises(SpecError, match=r"^data: expected the mnist files, or a download of them"):
        checks.check_data_on_a_worker(dataclasses.replace(sweep, download=False))
    checks.check_data_on_a_worker(parse_space(copy.deepcopy(TINY_SPACE)))  # the digits: nothing to fetch


@pytest.mark.ray
@pytest.mark.slow
def test_storage_that_a_node_cannot_see_is_refused_on_a_multi_node_cluster(tmp_path, monkeypatch):
    import ray

    from sweep.backends import checks as ray_backend
    from sweep.config.errors import SpecError

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        nodes = [n for n in ray.nodes() if n["Alive"]]
        _a_worker_without_the_data_stops_the_run(ray_backend, tmp_path)
        seen = tmp_path / "seen"
        seen.write_text("x")
        assert ray_backend.blind_nodes(seen, nodes) == []
        assert ray_backend.blind_nodes(tmp_path / "missing", nodes) == [nodes[0]["NodeManagerAddress"]]
        sweep_dir = SweepDir(tmp_path, "s")
        sweep_dir.create()
        ray_backend.check_storage_shared(sweep_dir, nodes)  # one node: nothing to check
        ray_backend.check_storage_shared(sweep_dir, nodes * 2)  # the one real node sees it twice: fine
        assert not list(sweep_dir.path.glob(".stitchsweep-visible-*"))  # the marker is cleaned up
        monkeypatch.setattr(ray_backend, "blind_nodes", lambda path, nodes: ["10.0.0.12"])
        with pytest.raises(SpecError, match=r"^--storage: expected storage every node .* 10\.0\.0\.12"):
            ray_backend.check_storage_shared(sweep_dir, nodes * 2)
    finally:
        ray.shutdown()
