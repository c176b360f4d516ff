"""Results on an object store: the S3 API of a real `moto` server on loopback (not a mocked client).

The storage layer (`sweep.store.storage`) is checked on the local filesystem and on S3 alike; then a whole sweep
runs with `--storage s3://...` on an embedded Ray, and `status`, `resume` and `report` read it back from there.
"""

import os
import shutil
import socket
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

import analysis
from sweep.config.space import parse_space
from sweep.store.compact import recorded_parts
from sweep.store.results import SweepDir, read_status, remove_stale_tmp, writable_or_error, write_rows
from sweep.store.schema import trial_schema
from sweep.store.storage import StorageError, child_uri, open_root

BUCKET = "stitchsweep-test"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3():
    """A moto S3 server on loopback with one bucket; yields the endpoint ("127.0.0.1:PORT")."""
    server = shutil.which("moto_server", path=os.path.dirname(sys.executable)) or shutil.which("moto_server")
    if server is None:
        pytest.fail("moto_server is not installed: `make test` installs it with the test extras")
    port = _free_port()
    proc = subprocess.Popen(
        [server, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    try:
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, "moto_server exited"
                assert time.time() < deadline, "moto_server did not start"
                time.sleep(0.2)
        endpoint = f"127.0.0.1:{port}"
        fs = pafs.S3FileSystem(endpoint_override=endpoint, scheme="http", allow_bucket_creation=True)
        fs.create_dir(BUCKET)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _uri(endpoint: str, prefix: str) -> str:
    return f"s3://{BUCKET}/{prefix}?endpoint_override={endpoint}&scheme=http"


@pytest.fixture(params=["local", "s3"])
def root(request, tmp_path):
    if request.param == "local":
        return open_root(tmp_path / "store")
    return open_root(_uri(request.getfixturevalue("s3"), f"unit-{time.time_ns()}"))


def test_locations_write_read_list_and_rename_alike(root):
    a = root / "trials" / "a.parquet"
    assert not a.exists() and root.glob("*") == [] and (root / "trials").files(".parquet") == []
    write_rows(a, [{"trial_id": "a", "status": "done", "clean_acc": 0.5}], trial_schema())
    assert a.is_file() and read_status(a) == "done"
    assert a.read_parquet().schema.equals(trial_schema())
    (root / "trials" / "b.txt").write_text("not a part")
    assert [p.name for p in (root / "trials").files(".parquet")] == ["a.parquet"]  # no temporary file left
    assert [p.name for p in root.glob("tri*")] == ["trials"]
    moved = a.rename(a.with_name("a.parquet.corrupt"))
    assert not a.exists() and moved.is_file() and moved.name == "a.parquet.corrupt"
    moved.unlink()
    moved.unlink(missing_ok=True)
    with pytest.raises(FileNotFoundError):
        moved.unlink()
    assert writable_or_error(root / "sweep") is None


def test_a_reader_never_sees_a_partial_part(root):
    """A part is replaced whole: every read while a writer rewrites it sees one complete version."""
    part = root / "p.parquet"
    for n in (1, 1000, 5):
        write_rows(part, [{"trial_id": str(i), "status": "done"} for i in range(n)], trial_schema())
        assert part.read_parquet().num_rows == n
    assert [p.name for p in root.glob("*")] == ["p.parquet"]


def test_stale_temporary_files_are_found_on_any_storage(root):
    d = SweepDir(root, "s")
    d.create()
    (d.trials / ".tmp-x.parquet.1234").write_bytes(b"half")  # as a writer killed between write and rename leaves
    assert remove_stale_tmp(d) == 1 and d.trials.glob("*") == []


def test_uris_keep_their_options_and_never_print_them(s3):
    uri = _uri(s3, "pre/fix")
    assert child_uri(uri, "tiny") == f"s3://{BUCKET}/pre/fix/tiny?endpoint_override={s3}&scheme=http"
    loc = open_root(uri) / "tiny"
    assert str(loc) == f"s3://{BUCKET}/pre/fix/tiny" and "endpoint" not in repr(loc)
    with pytest.raises(StorageError, match="foo://x"):
        open_root("foo://x/y")


def test_a_bucket_that_does_not_exist_is_not_writable(s3):
    problem = writable_or_error(open_root(_uri(s3, "x").replace(BUCKET, "no-such-bucket")))
    assert problem is not None and "no-such-bucket" in problem


def test_an_unreachable_endpoint_is_refused_quickly(tiny_space, write_space):
    from sweep.cli import main

    t0 = time.perf_counter()
    rc = main(["run", str(write_space(tiny_space)), "--storage", _uri(f"127.0.0.1:{_free_port()}", "r")])
    assert rc == 2 and time.perf_counter() - t0 < 30


CLI = [sys.executable, "-m", "sweep"]


def _cli(*args, check=True):
    proc = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.mark.ray
@pytest.mark.slow
def test_a_sweep_on_s3_runs_resumes_and_reports_from_there(s3, tiny_space, write_space, tmp_path, monkeypatch):
    monkeypatch.setenv("STITCHSWEEP_COMPACT_ABOVE", "0")  # compact every table (the default waits for 100 files)
    tiny_space["stitching"]["objectives"] = ["dm"]
    space = write_space(tiny_space)
    storage = _uri(s3, "sweeps")
    results = child_uri(storage, "tiny")
    planned = {t.trial_id for t in parse_space(tiny_space).trials}

    out = _cli("run", space, "--storage", storage, "--num-cpus", 2).stdout
    assert f"results: {results}" in out and "2 trials: 2 done, 0 failed, 0 pending" in out
    sweep = open_root(results)
    assert {n.removesuffix(".parquet") for n in recorded_parts(sweep / "trials")} == planned
    (compacted,) = (sweep / "trials").files(".parquet")  # the stage's parts, compacted into one object
    assert (open_root(storage) / "zoo").rglob("model.pt"), "the donor checkpoint lives in the bucket too"
    assert not sweep.rglob(".tmp-*") and not (sweep / "_ray").rglob("*"), "nothing temporary is left behind"
    assert not list(tmp_path.glob("**/*.parquet")), "nothing was written to local disk instead"

    trials = analysis.load_trials(results)
    assert set(trials["trial_id"]) == planned and (trials["status"] == "done").all(), trials["error"].tolist()
    assert "2 trials: 2 done" in _cli("status", results).stdout

    # A corrupt compacted object on S3 is set aside and its units recomputed by resume.
    compacted.write_bytes(b"PAR1 truncated")
    again = _cli("resume", results, "--num-cpus", 2).stdout
    assert "0 already recorded, 2 to run" in again and "2 done, 0 failed, 0 pending" in again
    assert compacted.with_name(compacted.name + ".corrupt").is_file()
    assert analysis.load_trials(results)["trial_id"].is_unique

    report = tmp_path / "report"
    _cli("report", results, "--out", report)
    assert "vegaEmbed" in (report / "index.html").read_text()
    assert (report / "stitching.png").stat().st_size > 1000


def test_a_table_written_elsewhere_is_read_the_same_from_s3(s3, tmp_path):
    """The reader gives the same frame from a local folder and from its copy in the bucket."""
    local = tmp_path / "r"
    rows = [{"trial_id": f"t{i}", "status": "done", "clean_acc": i / 10} for i in range(3)]
    for r in rows:
        write_rows(local / "trials" / f"{r['trial_id']}.parquet", [r], trial_schema())
    remote = open_root(_uri(s3, f"copy-{time.time_ns()}"))
    pafs.copy_files(str(local), remote.path, destination_filesystem=remote.fs)
    a = analysis.load_trials(local).sort_values("trial_id").reset_index(drop=True)
    b = analysis.load_trials(remote).sort_values("trial_id").reset_index(drop=True)
    assert a.equals(b) and len(a) == 3
    assert pa.Table.from_pandas(b).num_rows == 3


def test_every_results_column_describes_itself_in_the_parquet_schema(tmp_path):
    """Each field of every table carries a description in its metadata, and a written part keeps it, so any
    Parquet reader shows what a column holds."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sweep.store.layout import tables
    from sweep.store.results import open_root, write_rows
    from sweep.store.schema import schema

    for table in tables():
        for field in schema(table):
            text = (field.metadata or {}).get(b"description", b"").decode()
            assert len(text) > 10, f"{table}.{field.name} has no description"
    part = open_root(tmp_path) / "t.parquet"
    write_rows(part, [{"trial_id": "x", "status": "done", "clean_acc": 0.5}], schema("trials"))
    read = pq.read_schema(tmp_path / "t.parquet")
    assert b"share of the test images" in read.field("clean_acc").metadata[b"description"]
    assert read.field("clean_acc").type == pa.float64()
