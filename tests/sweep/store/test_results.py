"""Parquet parts: atomic writes, explicit schemas, unified reads."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import analysis
from sweep.store.results import SweepDir, remove_stale_tmp, write_rows
from sweep.store.schema import trial_schema


def test_rows_are_written_with_the_full_schema(tmp_path):
    path = tmp_path / "trials" / "a.parquet"
    write_rows(path, [{"trial_id": "a", "status": "done", "clean_acc": 0.5}], trial_schema())
    table = pq.read_table(path)
    assert table.schema.equals(trial_schema())
    assert not list(path.parent.glob(".tmp-*"))


def test_unknown_field_is_refused(tmp_path):
    with pytest.raises(KeyError, match="clean_accuracy"):
        write_rows(tmp_path / "a.parquet", [{"clean_accuracy": 1.0}], trial_schema())


def test_reader_keeps_columns_of_old_and_new_parts(tmp_path):
    trials = tmp_path / "trials"
    trials.mkdir()
    # an "old" part that predates most columns, and a part with a column the schema does not know
    pq.write_table(pa.table({"trial_id": ["old"], "status": ["done"]}), trials / "old.parquet")
    new = pa.Table.from_pylist([{"trial_id": "new", "status": "done", "clean_acc": 0.7}], schema=trial_schema())
    new = new.append_column("future_metric", pa.array([1.5]))
    pq.write_table(new, trials / "new.parquet")
    (trials / ".tmp-half.parquet").write_bytes(b"PAR1 half a file")
    df = analysis.load_trials(tmp_path).set_index("trial_id")
    assert set(df.index) == {"old", "new"}
    assert df.loc["new", "future_metric"] == 1.5 and df.loc["new", "clean_acc"] == 0.7
    assert "clean_acc" in df.columns and df["clean_acc"].isna().sum() == 1


def test_empty_results_have_the_schema_columns(tmp_path):
    df = analysis.load_trials(tmp_path)
    assert len(df) == 0 and list(df.columns) == trial_schema().names


def test_stale_temporary_files_are_removed(tmp_path):
    d = SweepDir(tmp_path, "s")
    d.create()
    (d.trials / ".tmp-x.parquet.1234").write_bytes(b"half")
    assert remove_stale_tmp(d) == 1
    assert not d.trials.glob("*")


def test_a_worker_s_half_written_cache_record_is_removed(tmp_path):
    """A worker killed while rewriting its cache record (`<sweep>/_cache_keys/`) leaves a temporary file there."""
    from sweep.worker.cache import RECORD_DIR

    d = SweepDir(tmp_path, "s")
    d.create()
    records = d.path / RECORD_DIR
    (records / ".tmp-vm-5507-9b6e9493.json.f61c39c0").write_text('{"files": [')
    (records / "vm-5507-9b6e9493.json").write_text('{"files": []}')
    assert remove_stale_tmp(d) == 1
    assert [p.name for p in records.glob("*")] == ["vm-5507-9b6e9493.json"]
