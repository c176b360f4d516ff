"""`plan` and `status` for people and for scripts: the summary, every unit with --trials, --json, what a
results root has recorded, and status's exit code (0 only for a complete sweep)."""

import json

import pytest
import torch
import yaml

from sweep.cli import EXIT_INCOMPLETE, main
from sweep.config.space import parse_space
from sweep.kinds.donor.run import run_donor
from sweep.kinds.trial.run import run_trial
from sweep.store.results import SweepDir


def _results(space: dict, root, donor: bool = True):
    """A results directory as `run` leaves it after the donor stage: the space copied in, the donor trained."""
    sweep = parse_space(space)
    sweep_dir = SweepDir(root, sweep.name)
    sweep_dir.create()
    sweep_dir.space.write_text(yaml.safe_dump(space))
    if donor:
        run_donor(sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, torch.device("cpu"))
    return sweep, sweep_dir


def test_plan_summarises_by_pair_and_objective_and_lists_every_trial_on_request(tiny_space, write_space, capsys):
    space = str(write_space(tiny_space))
    assert main(["plan", space]) == 0
    summary = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("  memory:")]
    assert summary[-2:] == ["  zoo:plain_a -> zoo:plain_a tlm: 2 trials", "  zoo:plain_a -> zoo:plain_a dm: 2 trials"]
    assert main(["plan", space, "--trials"]) == 0
    full = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("  memory:")]
    assert len(full) == 1 + 1 + 4 and sum("@layer1.0" in line for line in full) == 2


@pytest.mark.slow
def test_plan_json_and_storage_say_what_is_recorded_and_what_would_run(tiny_space, write_space, tmp_path, capsys):
    sweep = parse_space(tiny_space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    run_donor(sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, torch.device("cpu"))
    first = sweep.trials[0]
    run_trial(first, sweep_dir, device=torch.device("cpu"))
    space = str(write_space(tiny_space))
    assert main(["plan", space, "--json", "--storage", str(tmp_path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    trials = doc["kinds"]["trial"]
    assert trials["count"] == 4 and trials["recorded"] == 1 and first.trial_id not in trials["to_run"]
    assert {u["id"] for u in trials["units"]} == {t.trial_id for t in sweep.trials}
    assert doc["kinds"]["donor"]["recorded"] == 1
    assert main(["plan", space, "--storage", str(tmp_path)]) == 0
    assert "trials under" in capsys.readouterr().out.splitlines()[-1]


@pytest.mark.slow
def test_status_exit_code_and_json_tell_a_complete_sweep_from_an_incomplete_one(tiny_space, tmp_path, capsys):
    sweep, sweep_dir = _results(tiny_space, tmp_path)
    run_trial(sweep.trials[0], sweep_dir, device=torch.device("cpu"))
    results = str(tmp_path / sweep.name)
    assert main(["status", results, "--json"]) == EXIT_INCOMPLETE
    doc = json.loads(capsys.readouterr().out)
    assert doc["complete"] is False
    assert {k: doc["kinds"]["trial"][k] for k in ("total", "done", "failed", "pending")} == {
        "total": 4, "done": 1, "failed": 0, "pending": 3
    }  # fmt: skip
    assert main(["status", results]) == EXIT_INCOMPLETE
    assert "finish with: stitchsweep resume" in capsys.readouterr().out
    for t in sweep.trials[1:]:
        run_trial(t, sweep_dir, device=torch.device("cpu"))
    assert main(["status", results, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["complete"] is True


def test_plan_refuses_an_identity_init_between_different_channel_counts(tiny_space, write_space, capsys):
    """What shapes can tell is caught by `plan`, before Ray starts: an identity needs equal channel counts."""
    tiny_space["stitching"].update(init="identity", end_points="all", objectives=["tlm"])
    del tiny_space["stitching"]["dm_samples"]
    assert main(["plan", str(write_space(tiny_space))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stitchsweep: error: stitching.init: expected a stitcher that can start as the identity")
    assert "zoo:plain_a @layer1.0 (8 channels) to zoo:plain_a @layer2.0 (16)" in err


def test_a_dataset_that_cannot_be_had_stops_the_run_before_ray_in_one_line(tiny_space, write_space, tmp_path,
                                                                           monkeypatch, capsys):  # fmt: skip
    """Offline MNIST: one attempt in the driver, one line naming the dataset, no Ray, no trial recorded."""
    import sweep.data.core as core

    calls = []

    def offline(name, root=None, download=True):
        calls.append(name)
        raise RuntimeError("Error downloading train-images-idx3-ubyte.gz:\nTried https://...\n<urlopen error>")

    monkeypatch.setattr(core, "load_pool", offline)
    tiny_space["data"] = {"dataset": "mnist", "root": str(tmp_path / "data"), "train_size": 100, "test_size": 50}
    storage = tmp_path / "results"
    assert main(["run", str(write_space(tiny_space)), "--storage", str(storage)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "stitchsweep: error: data: expected the mnist files, or a download of them, found 'neither'"
        " (RuntimeError: Error downloading train-images-idx3-ubyte.gz:)"
    )
    assert calls == ["mnist"] and not list((storage / "tiny" / "trials").glob("*.parquet"))


@pytest.mark.slow
def test_units_of_a_failed_donor_are_blocked_until_it_succeeds(tiny_space, tmp_path, monkeypatch, capsys):
    """A donor that fails blocks the trials that read it: `status` counts them as blocked (not pending, not
    run), and once the donor succeeds they are pending again."""
    import sweep.kinds.donor.run as donor_kind
    from sweep.planning import planning

    sweep = parse_space(tiny_space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    sweep_dir.space.write_text(yaml.safe_dump(tiny_space))
    real = donor_kind.worker_splits

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(donor_kind, "worker_splits", broken)
    row = run_donor(sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, torch.device("cpu"))
    assert row["status"] == "failed"
    prog = planning.progress(sweep, sweep_dir)["trial"]
    assert prog.pending == [] and set(prog.blocked) == {t.trial_id for t in sweep.trials}
    assert all(v == ["zoo:plain_a"] for v in prog.blocked.values())
    ready, blocked = planning.runnable(sweep, sweep_dir, "trial", [t.trial_id for t in sweep.trials])
    assert ready == [] and len(blocked) == 4
    assert main(["status", str(tmp_path / sweep.name)]) == EXIT_INCOMPLETE
    out = capsys.readouterr().out
    assert "4 trials: 0 done, 0 failed, 0 pending, 4 blocked by failed donors (zoo:plain_a)" in out
    monkeypatch.setattr(donor_kind, "worker_splits", real)
    assert (
        run_donor(sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, torch.device("cpu"))["status"]
        == "done"
    )
    prog = planning.progress(sweep, sweep_dir)["trial"]
    assert not prog.blocked and len(prog.pending) == 4


@pytest.mark.slow
def test_the_reports_header_counts_an_interrupted_sweep_and_lists_trials_left_out_of_the_space(
    tiny_space, tmp_path, capsys
):
    import pandas as pd

    sweep = parse_space(tiny_space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    run_donor(sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, torch.device("cpu"))
    first, second = [t for t in sweep.trials if t.objective == "dm"]  # fast: direct matching
    run_trial(first, sweep_dir, device=torch.device("cpu"))
    run_trial(second, sweep_dir, device=torch.device("cpu"))
    # the space shrinks after the run: the second trial's point is no longer in it
    tiny_space["stitching"]["stitch_points"] = [first.front_point]
    sweep_dir.space.write_text(yaml.safe_dump(tiny_space))
    out = tmp_path / "report"
    assert main(["report", str(tmp_path / sweep.name), "--out", str(out)]) == 0
    page = (out / "index.html").read_text()
    assert "1 of 2 trials recorded (1 done, 0 failed), 1 pending" in page
    assert "1 of 1 donors recorded (1 done, 0 failed), 0 pending" in page
    assert "Trials no longer in the space" in page
    stale = pd.read_csv(out / "stale_trials.csv")
    assert list(stale["trial_id"]) == [second.trial_id]
    assert list(pd.read_csv(out / "trials.csv")["trial_id"]) == [first.trial_id]


@pytest.mark.slow
def test_a_report_folder_is_per_sweep_replaced_by_its_next_report_and_refused_when_not_its_own(
    tiny_space, tmp_path, capsys, monkeypatch
):
    sweep = parse_space(tiny_space)
    sweep_dir = SweepDir(tmp_path / "results", sweep.name)
    sweep_dir.create()
    sweep_dir.space.write_text(yaml.safe_dump(tiny_space))
    run_donor(sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, torch.device("cpu"))
    results = str(tmp_path / "results" / sweep.name)
    monkeypatch.chdir(tmp_path)
    assert main(["report", results]) == 0  # default: ./report/<sweep>
    out = tmp_path / "report" / "tiny"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sweep"] == "tiny" and "index.html" in manifest["files"] and "donors.csv" in manifest["files"]
    (out / "trials.csv").unlink()  # a file the previous report wrote, gone: no matter
    assert main(["report", results]) == 0  # the same sweep's report replaces its own files
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    assert main(["report", results, "--out", str(mine)]) == 2
    assert "--out: expected an empty folder, or this sweep's previous report" in capsys.readouterr().err
    assert (mine / "notes.txt").read_text() == "keep me"
    other = tmp_path / "other"
    other.mkdir()
    (other / "manifest.json").write_text(json.dumps({"sweep": "quickstart", "files": ["index.html"]}))
    (other / "index.html").write_text("quickstart's")
    assert main(["report", results, "--out", str(other)]) == 2
    assert "another sweep ('quickstart')" in capsys.readouterr().err and (other / "index.html").exists()


@pytest.mark.slow
def test_rays_records_of_interrupted_runs_go_once_the_sweep_is_complete(tiny_space, tmp_path, capsys):
    sweep, sweep_dir = _results(tiny_space, tmp_path)
    leftover = sweep_dir.ray.path + "/stitch-20261126-120000-000000/trial"
    import os

    os.makedirs(leftover)
    open(leftover + "/result.json", "w").close()
    results = str(tmp_path / sweep.name)
    assert main(["status", results]) == EXIT_INCOMPLETE  # status touches nothing
    assert sweep_dir.ray.exists()
    for t in sweep.trials:
        run_trial(t, sweep_dir, device=torch.device("cpu"))
    assert main(["resume", results]) == 0  # nothing left to run: no Ray; complete, so the records go
    assert not sweep_dir.ray.exists()
    assert "4 trials: 4 done, 0 failed, 0 pending" in capsys.readouterr().out


@pytest.mark.slow
def test_a_trial_with_permutations_records_each_index_null(tiny_space, tmp_path):
    """`permutations:` joins the trial id only when set, is refused without indices, and a trial records
    `<index>_null` and `<index>_p` for each similarity and distance it measures."""
    import copy

    from sweep.config.errors import SpecError

    plain = parse_space(tiny_space).trials
    tiny_space["stitching"].update(indices=["cka", "opd", "rank"], similarity_samples=60)
    with_indices = {t.trial_id for t in parse_space(tiny_space).trials}
    zero = copy.deepcopy(tiny_space)
    zero["stitching"]["permutations"] = 0
    assert {t.trial_id for t in parse_space(zero).trials} == with_indices  # 0: the default, not in the hash
    tiny_space["stitching"]["permutations"] = 19
    sweep, sweep_dir = _results(tiny_space, tmp_path)
    assert not {t.trial_id for t in sweep.trials} & with_indices
    row = run_trial(sweep.trials[0], sweep_dir, device=torch.device("cpu"))
    assert row["status"] == "done" and row["permutations"] == 19
    for col in ("sim_cka", "sim_opd"):
        assert 1 / 20 <= row[f"{col}_p"] <= 1 and row[f"{col}_null"] == row[f"{col}_null"]  # set, not NaN
    assert "rank_front_null" not in row
    bad = copy.deepcopy(tiny_space)
    del bad["stitching"]["indices"], bad["stitching"]["similarity_samples"]
    with pytest.raises(SpecError, match=r"^stitching.permutations: expected an option of a block that lists indices"):
        parse_space(bad)
    assert plain  # the space without indices still expands


@pytest.mark.slow
def test_a_status_manifest_spares_reading_parts_that_did_not_change(tiny_space, tmp_path, monkeypatch):
    """After a run, `status` reads no part whose listing shows the size and time the manifest recorded; a part
    rewritten since (or one the manifest does not know) is read again."""
    import os

    import sweep.store.results as results
    from sweep.planning import planning

    sweep, sweep_dir = _results(tiny_space, tmp_path)
    for t in sweep.trials[:2]:
        run_trial(t, sweep_dir, device=torch.device("cpu"))
    assert planning.write_manifest(sweep, sweep_dir) == 3  # the donor's part and two trials
    reads = []
    real = results.read_status
    monkeypatch.setattr(results, "read_status", lambda part: reads.append(part.name) or real(part))
    prog = planning.progress(sweep, sweep_dir)
    assert reads == [] and len(prog["trial"].done) == 2 and len(prog["trial"].pending) == 2
    part = sweep_dir.trial_part(sweep.trials[0].trial_id)
    os.utime(part.path, ns=(1, 1))  # the same bytes, another time: no longer trusted
    run_trial(sweep.trials[2], sweep_dir, device=torch.device("cpu"))  # a part the manifest does not know
    prog = planning.progress(sweep, sweep_dir)
    assert sorted(reads) == sorted([part.name, f"{sweep.trials[2].trial_id}.parquet"])
    assert len(prog["trial"].done) == 3


@pytest.mark.slow
def test_results_hold_no_spurious_float32_digits(tiny_space, tmp_path):
    """Accuracies are exact ratios of counts; float32 losses are stored as the float32 precision they carry."""
    import numpy as np

    sweep, sweep_dir = _results(tiny_space, tmp_path)
    tlm = next(t for t in sweep.trials if t.objective == "tlm")
    row = run_trial(tlm, sweep_dir, device=torch.device("cpu"))
    n = row["test_size"]
    assert abs(row["clean_acc"] * n - round(row["clean_acc"] * n)) < 1e-9
    loss = row["final_train_loss"]
    assert loss == float(str(np.float32(loss))) and len(repr(loss).replace("0.", "")) <= 10


def test_every_command_and_argument_has_help_and_an_example():
    from sweep.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert set(commands) == set("plan run resume status compact report figures du prune schema init".split())
    for name, sub in commands.items():
        assert sub.epilog and sub.epilog.startswith(f"example: stitchsweep {name} "), name
        for action in sub._actions:
            if action.dest != "help":
                assert action.help, f"{name} {action.dest} has no help"


@pytest.mark.slow
def test_a_snapshot_serves_the_rows_of_unchanged_parts_and_rereads_the_rest(tiny_space, tmp_path, monkeypatch):
    """After `write_snapshot`, reading a table reads no part whose listing is unchanged; a rewritten part is
    read again, a deleted one's rows are gone, and the rows equal a read without the snapshot."""
    import importlib
    import os

    load, snapshot = importlib.import_module("analysis.reading"), importlib.import_module("sweep.store.snapshot")
    sweep, sweep_dir = _results(tiny_space, tmp_path)
    for t in sweep.trials[:3]:
        run_trial(t, sweep_dir, device=torch.device("cpu"))
    plain = load.load_trials(sweep_dir.path)
    assert snapshot.write_snapshot(sweep_dir.path) >= 4  # three trials and the donor's part, and their curves
    reads = []
    real = snapshot.read_part
    monkeypatch.setattr(
        snapshot, "read_part", lambda part, kind, expected: reads.append(part.name) or real(part, kind, expected)
    )
    again = load.load_trials(sweep_dir.path)
    assert reads == [] and again.equals(plain)
    first, second = (sweep_dir.trial_part(t.trial_id) for t in sweep.trials[:2])
    os.utime(first.path, ns=(1, 1))
    second.unlink()
    after = load.load_trials(sweep_dir.path)
    assert reads == [first.name] and len(after) == 2 and sweep.trials[1].trial_id not in set(after["trial_id"])


@pytest.mark.slow
def test_a_snapshot_of_an_earlier_release_reads_with_the_columns_it_predates(tiny_space, tmp_path):
    """A snapshot written before a column existed (an upgrade between two runs of a sweep) reads with that
    column null, like a part of that release does."""
    import importlib

    import pyarrow.parquet as pq

    load, snapshot = importlib.import_module("analysis.reading"), importlib.import_module("sweep.store.snapshot")
    sweep, sweep_dir = _results(tiny_space, tmp_path)
    run_trial(sweep.trials[0], sweep_dir, device=torch.device("cpu"))
    snapshot.write_snapshot(sweep_dir.path)
    snap = sweep_dir.path / snapshot.SNAPSHOT_DIR / f"trials{snapshot.SNAPSHOT_SUFFIX}"
    older = pq.read_table(str(snap))
    pq.write_table(older.drop_columns(["head_agreement", "n_disagree"]), str(snap))  # as an earlier release wrote it
    trials = load.load_trials(sweep_dir.path)
    assert len(trials) == 1 and trials["head_agreement"].isna().all() and trials["n_disagree"].isna().all()
    assert trials["clean_acc"].notna().all()


@pytest.mark.slow
def test_plan_with_storage_changes_nothing_there(tiny_space, write_space, tmp_path, monkeypatch, capsys):
    """`plan --storage` only looks: a failed donor's part (which a run would remove to retry it) stays."""
    import sweep.kinds.donor.run as donor_kind

    sweep, sweep_dir = _results(tiny_space, tmp_path, donor=False)
    monkeypatch.setattr(donor_kind, "worker_splits", lambda *a, **k: (_ for _ in ()).throw(OSError("disk full")))
    run_donor(sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, torch.device("cpu"))
    before = sorted(p.name for p in sweep_dir.donors.files(".parquet"))
    assert before and main(["plan", str(write_space(tiny_space)), "--storage", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kinds"]["donor"]["to_run"] == ["plain_a"]
    assert sorted(p.name for p in sweep_dir.donors.files(".parquet")) == before
