"""`cluster/slurm.sbatch` on a real one-host SLURM cluster (Debian's slurm-wlm and munge), started by the test.

The test writes a slurm.conf for this host into a temporary folder, starts its own munged (a generated key,
its own socket), slurmctld and slurmd, submits a tiny sweep with `sbatch cluster/slurm.sbatch`, and checks
that it finishes through `ray symmetric-run`. A second sweep is cancelled with `scancel` half way and
submitted again: it must end with every unit exactly once, and the parts written before the cancel must be
left as they were. slurmd runs in a PID namespace of its own (`unshare --pid`): `ray symmetric-run` ends with
`ray stop`, which stops every Ray process it can see, and on a shared machine it must see only the job's.
Killing the namespace's first process ends every process of every job; munged and slurmctld are killed by
PID. The `#SBATCH` lines are for a GPU cluster; the test overrides them on sbatch's command line.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, TINY_SPACE

DAEMONS = ["munged", "slurmctld", "slurmd", "sbatch", "scancel", "squeue", "sinfo", "unshare"]
MISSING = [d for d in DAEMONS if shutil.which(d) is None]
pytestmark = [
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.skipif(
        bool(MISSING),
        reason=f"SLURM is not installed (missing: {', '.join(MISSING)}); as root: make slurm"
        " (apt-get install slurm-wlm munge)",
    ),
    pytest.mark.skipif(os.geteuid() != 0, reason="a one-host SLURM needs root (slurmd, a PID namespace)"),
]

CLI = [sys.executable, "-m", "sweep"]
SBATCH = str(REPO / "cluster" / "slurm.sbatch")
# A 2-CPU node without GPUs; the shipped script asks for 4 nodes with 4 GPUs each.
OVERRIDES = ["--nodes=1", "--ntasks-per-node=1", "--cpus-per-task=2", "--gpus-per-task=0", "--time=10:00"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SLURM_CONF = """\
ClusterName=stitchsweep
SlurmctldHost={host}
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={dir}/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
NodeName={host} CPUs=2 State=UNKNOWN
PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


class Slurm:
    """munged, slurmctld and slurmd for this host, with their files in one temporary folder."""

    def __init__(self) -> None:
        # short: munge's socket path must fit in a sockaddr_un
        self.dir = Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))
        self.host = socket.gethostname().split(".")[0]  # `hostname -s`
        self.procs: list[subprocess.Popen] = []
        self.env = {**os.environ, "SLURM_CONF": str(self.dir / "slurm.conf")}

    def _daemon(self, name: str, *argv: str) -> None:
        log = open(self.dir / f"{name}.out", "w")
        self.procs.append(subprocess.Popen(list(argv), env=self.env, stdout=log, stderr=subprocess.STDOUT))

    def start(self) -> None:
        (self.dir / "state").mkdir()
        (self.dir / "spool").mkdir()
        key = self.dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        d = self.dir
        self._daemon(
            "munged", "munged", "--foreground", "--force", f"--socket={d}/munge.socket", f"--key-file={key}",
            f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log", f"--seed-file={d}/munged.seed",
        )  # fmt: skip
        conf = SLURM_CONF.format(host=self.host, ctld_port=_free_port(), slurmd_port=_free_port(), dir=d)
        (d / "slurm.conf").write_text(conf)
        self._wait(lambda: (d / "munge.socket").exists(), "munged")
        self._daemon("slurmctld", "slurmctld", "-D", "-c")
        # bash as the namespace's first process reaps the Ray daemons that `ray start` orphans; --kill-child
        # ends the namespace, and with it every job's processes, when unshare is killed
        self._daemon("slurmd", "unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "bash", "-c",
                     "slurmd -D & wait")  # fmt: skip
        self._wait(lambda: self.slurm("sinfo", "-h", "-o", "%T").stdout.strip() == "idle", "the node")

    def _wait(self, ready, what: str, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        while not ready():
            for p in self.procs:
                assert p.poll() is None, f"{p.args[0]} exited:\n{self.logs()}"
            assert time.time() < deadline, f"{what} not ready in {timeout} s\n{self.logs()}"
            time.sleep(0.2)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.dir.glob("*.out")))

    def slurm(self, *argv: str, timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env=env or self.env, capture_output=True, text=True, timeout=timeout)

    def namespace(self) -> str | None:
        """The PID namespace of slurmd and the jobs (`pid:[N]`), or None before unshare made it."""
        unshare = self.procs[-1] if len(self.procs) == 3 else None
        try:
            children = Path(f"/proc/{unshare.pid}/task/{unshare.pid}/children").read_text().split()
            return os.readlink(f"/proc/{children[0]}/ns/pid")
        except (AttributeError, OSError, IndexError):
            return None

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.kill()
        for p in self.procs:
            p.wait(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)


def _in_namespace(ns: str) -> list[str]:
    """PIDs of the live processes in the PID namespace `ns`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/ns/pid") == ns:
                found.append(pid)
        except OSError:
            pass
    return found


@pytest.fixture
def slurm():
    s = Slurm()
    ns = None
    try:
        s.start()
        ns = s.namespace()
        assert ns is not None, "slurmd's PID namespace not found"
        yield s
    finally:
        ns = ns or s.namespace()
        s.stop()
    assert all(p.poll() is not None for p in s.procs)
    deadline = time.time() + 30
    while _in_namespace(ns):  # the kernel ends a namespace's processes when its first one dies
        assert time.time() < deadline, f"processes of the jobs outlived the test: {_in_namespace(ns)}"
        time.sleep(0.2)


def _job_env(slurm: Slurm) -> dict:
    """What the job inherits (sbatch exports the submitter's environment): this checkout first on the path, its
    venv, and a lean Ray on a free port with its files in the test's folder."""
    return {
        **slurm.env,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "STITCHSWEEP_VENV": str(Path(sys.executable).parent.parent),
        "STITCHSWEEP_RAY_PORT": str(_free_port()),
        "STITCHSWEEP_RAY_START_ARGS": f"--include-dashboard=false --temp-dir={slurm.dir}/ray",
        "RAY_USAGE_STATS_ENABLED": "0",
    }


def _submit(slurm: Slurm, space: Path, storage: Path, log: Path, wait: bool) -> str:
    argv = ["sbatch", "--parsable", *OVERRIDES, f"--output={log}", *(["--wait"] if wait else [])]
    out = slurm.slurm(*argv, SBATCH, str(space), str(storage), timeout=900, env=_job_env(slurm))
    text = log.read_text() if log.exists() else ""
    assert out.returncode == 0, f"{out.stdout}{out.stderr}\n{text}\n{slurm.logs()}"
    return out.stdout.strip().split(";")[0]


def _parts(results: Path) -> dict[str, tuple[bytes, int]]:
    """Every finished trial part: its bytes and modification time (a rewrite changes one or the other)."""
    return {
        p.name: (p.read_bytes(), p.stat().st_mtime_ns)
        for p in (results / "trials").glob("*.parquet")
        if not p.name.startswith(".")
    }


def _planned(space: Path) -> int:
    out = subprocess.run([*CLI, "plan", str(space), "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["kinds"]["trial"]["count"]


def _space(tmp_path: Path, name: str, **stitching) -> Path:
    space = {**TINY_SPACE, "name": name, "stitching": {**TINY_SPACE["stitching"], **stitching}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))
    return path


def _recorded_once(results: Path, planned: int) -> None:
    import analysis

    trials = analysis.load_trials(results)
    assert len(trials) == planned and trials["trial_id"].nunique() == planned
    assert (trials["status"] == "done").all(), trials["error"].tolist()


def test_a_sweep_runs_through_sbatch_and_a_cancelled_one_resumes_exactly_once(slurm, tmp_path):
    storage = tmp_path / "results"
    # 1. A tiny sweep (1 donor, 4 trials) through `sbatch --wait`: `ray symmetric-run` starts Ray, runs the
    # sweep on the first node and stops Ray.
    space = _space(tmp_path, "tiny")
    log = tmp_path / "job1.log"
    _submit(slurm, space, storage, log, wait=True)
    out = log.read_text()
    assert "On head node. Starting Ray cluster head..." in out and "Running command on head node" in out, out
    assert "4 trials: 4 done, 0 failed, 0 pending" in out, out
    status = subprocess.run([*CLI, "status", str(storage / "tiny")], capture_output=True, text=True, timeout=300)
    assert status.returncode == 0, status.stdout + status.stderr
    assert len(_parts(storage / "tiny")) == _planned(space) == 4
    _recorded_once(storage / "tiny", 4)

    # 2. A second sweep (12 trials, the same donor) is cancelled half way and submitted again.
    space = _space(tmp_path, "tiny_cancelled", stitch_points="all", epochs=3)
    planned = _planned(space)
    assert planned == 12
    results = storage / "tiny_cancelled"
    log = tmp_path / "job2.log"
    job = _submit(slurm, space, storage, log, wait=False)
    deadline = time.time() + 600
    while len(_parts(results)) < 3:
        state = slurm.slurm("squeue", "-h", "-j", job, "-o", "%T").stdout.strip()
        assert state in ("PENDING", "RUNNING"), f"job {job}: {state!r}\n{log.read_text()}"
        assert time.time() < deadline, f"no trial finished in time\n{log.read_text()}"
        time.sleep(0.1)
    cancel = slurm.slurm("scancel", job)
    assert cancel.returncode == 0, cancel.stderr
    _stopped(slurm, job, log, time.time())  # SIGTERM to every process: the driver stops, the job is not requeued
    while state := slurm.slurm("squeue", "-h", "-j", job, "-o", "%T").stdout.strip():
        assert state == "COMPLETING", f"job {job}: {state} after scancel\n{log.read_text()}"
        assert time.time() < deadline, f"job {job} still listed after scancel"
        time.sleep(0.5)
    before = _parts(results)
    assert 3 <= len(before) < planned, f"the cancel should land mid-sweep\n{log.read_text()}"

    log = tmp_path / "job3.log"
    _submit(slurm, space, storage, log, wait=True)
    out = log.read_text()
    assert f"{planned} trials, {len(before)} already recorded, {planned - len(before)} to run" in out, out
    assert f"{planned} trials: {planned} done, 0 failed, 0 pending" in out, out
    after = _parts(results)
    assert len(after) == planned
    assert {name: after[name] for name in before} == before, "a part written before the cancel changed"
    assert not list(results.rglob(".tmp-*")), "no partial file may survive"
    _recorded_once(results, planned)


def _stopped(slurm: Slurm, job: str, log: Path, t0: float) -> None:
    """The job's driver, sent SIGTERM at `t0`, says how to resume within SLURM's default grace (30 s); then the
    job leaves the queue, or is requeued."""
    while "Finish with: stitchsweep resume" not in log.read_text():
        assert time.time() - t0 < 30, f"no resume line 30 s after SIGTERM\n{log.read_text()}\n{slurm.logs()}"
        time.sleep(0.2)
    text = log.read_text()
    assert "stitchsweep: stopped by SIGTERM" in text, text
    print(f"job {job}: the resume line {time.time() - t0:.1f} s after SIGTERM")
    while slurm.slurm("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() == "RUNNING":
        assert time.time() - t0 < 60, f"job {job} still running after SIGTERM\n{log.read_text()}"
        time.sleep(0.5)


def test_near_its_time_limit_a_job_stops_the_sweep_and_requeues_itself(slurm, tmp_path):
    """`--signal=B:USR1@120` sends the batch shell USR1 two minutes before `--time`; here `scancel --batch
    --signal=USR1` sends it at once. The script stops the driver (SIGTERM through srun), which exits with the
    resume line, and requeues the job, which runs the rest: every unit exactly once, the parts written before
    left as they were, one log for both runs (`--open-mode=append`)."""
    storage = tmp_path / "results"
    space = _space(tmp_path, "tiny_requeued", stitch_points="all", epochs=3)
    planned, results, log = _planned(space), storage / "tiny_requeued", tmp_path / "job.log"
    job = _submit(slurm, space, storage, log, wait=False)
    deadline = time.time() + 600
    while len(_parts(results)) < 3:
        state = slurm.slurm("squeue", "-h", "-j", job, "-o", "%T").stdout.strip()
        assert state in ("PENDING", "RUNNING"), f"job {job}: {state!r}\n{log.read_text()}"
        assert time.time() < deadline, f"no trial finished in time\n{log.read_text()}"
        time.sleep(0.1)
    warn = slurm.slurm("scancel", "--batch", "--signal=USR1", job)
    assert warn.returncode == 0, warn.stderr
    _stopped(slurm, job, log, time.time())
    before = _parts(results)
    assert 3 <= len(before) < planned, f"the stop should land mid-sweep\n{log.read_text()}"
    while (
        f"{planned} trials: {planned} done" not in log.read_text()
        or slurm.slurm("squeue", "-h", "-j", job, "-o", "%T").stdout.strip()
    ):
        assert time.time() < deadline, f"the requeued job did not finish\n{log.read_text()}\n{slurm.logs()}"
        time.sleep(1)
    out = log.read_text()
    assert f"job {job} requeued, it resumes the sweep when it runs again" in out, out
    assert f"{planned} trials, {len(before)} already recorded, {planned - len(before)} to run" in out, out
    after = _parts(results)
    assert len(after) == planned and {name: after[name] for name in before} == before
    assert not list(results.rglob(".tmp-*")), "no partial file may survive"
    _recorded_once(results, planned)
