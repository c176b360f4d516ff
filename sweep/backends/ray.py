"""The module that schedules the units of every kind of work as Tune trials (with `checks.py` and `node.py`, the
only modules that import Ray).

One stage per registered kind with work to do (`sweep.kinds`: the zoo stage of donors first, then the kinds
that read them: stitching trials, representation-test units), each as one Tune experiment whose trials are the
kind's units without a usable Parquet part, handed to Tune as slots free (`sweep.backends.feed`). Ray's own
experiment state is not what `resume` relies on: the parts are. A resumed or grown sweep is simply a new run
that skips every trial whose part exists, which is correct after a driver crash, a node loss or an edited
search space alike.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime

# The JSON/CSV/TensorBoard logger callbacks grow the driver's memory per trial and duplicate our Parquet
# parts; must be set before ray.tune is imported.
os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
# Tune's experiment-state snapshots (every trial's state as JSON, rewritten as the stage runs) are not what
# `resume` reads (the Parquet parts are): write them rarely instead of Tune's adaptive default.
os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "600")

import ray  # noqa: E402
from ray import tune  # noqa: E402

from sweep.backends.checks import (  # noqa: E402
    _check_reachable,
    check_data_on_a_worker,
    check_resources,
    check_storage_shared,
)
from sweep.backends.feed import Forget, Prune, StageUnits, slots  # noqa: E402
from sweep.backends.node import start_lean, stop_lean  # noqa: E402
from sweep.backends.progress import SweepProgress, phase  # noqa: E402
from sweep.backends.stage import compact_stage, eta_prices, plugin_env, trial_resources, worker_env  # noqa: E402
from sweep.config.errors import SpecError  # noqa: E402
from sweep.config.space import Sweep  # noqa: E402
from sweep.plan.planning import blocked_note, runnable  # noqa: E402
from sweep.store.results import Loc, SweepDir  # noqa: E402

# With the logger callbacks off, Tune's result grid warns once per trial that it found no result.json:
# expected, and our record is the Parquet parts.
logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)


class _QuietTune(logging.Filter):
    """Tune's own lines that contradict or repeat ours: its "Resume experiment with: Tuner.restore(...)" after
    Ctrl+C (`stitchsweep resume` is what resumes a sweep; Tune's restore would rerun its running trials only)
    and "Wrote the latest version of all result files" after every experiment (our parts are the record)."""

    HIDDEN = ("Resume experiment with", "Tuner.restore", "Wrote the latest version of all result files")

    def filter(self, record: logging.LogRecord) -> bool:
        return not any(text in record.getMessage() for text in self.HIDDEN)


logging.getLogger("ray.tune.tune").addFilter(_QuietTune())


@dataclass
class StageSummary:
    stage: str
    scheduled: int
    wall_s: float


def _threads(cpus: float) -> int:
    return max(1, int(cpus))


def _trainable(config: dict, run, units: dict, root: Loc, sweep_name: str, env: dict) -> None:
    """One unit of any kind, on a worker: the kind's own `run` (shipped by value or by reference, as
    cloudpickle sees fit, so a kind registered only in the driver runs too; a "module:function" name is
    imported here), its progress forwarded to Tune."""
    import torch

    from sweep.config.plugins import import_on_worker
    from sweep.data import stream
    from sweep.kinds.base import RunContext, resolve
    from sweep.worker.cache import configure

    import_on_worker(env["plugins"])  # registries are per process: the plugins register here too

    torch.set_num_threads(_threads(env["cpus"]))
    stream.configure(stream.loader_workers(env["cpus"]))  # image folders' decoding processes, from its CPUs
    cache = configure(env["cache"], env["share"])  # the driver's settings; a reused actor keeps what it cached
    ctx = RunContext(
        SweepDir(root, sweep_name),
        torch.device("cuda" if env["gpu"] and torch.cuda.is_available() else "cpu"),
        env["data_root"],
        env["download"],
        report=lambda m: tune.report(m),
    )
    out = resolve(run)(units[config["unit"]], ctx)
    worker = {"worker_pid": os.getpid(), "worker_node": ray.get_runtime_context().get_node_id()}
    st = cache.stats
    worker.update(cache_hits=st.hits + st.disk_hits, cache_misses=st.misses, cache_mb=cache.bytes / 2**20)
    tune.report({"status": out.get("status", "skipped"), **{k: v for k, v in out.items() if k != "status"}, **worker})


class _Progress(tune.Callback):
    """Tune's events for one stage, as lines on the driver's stdout (the Parquet parts are the real record)
    and as the whole sweep's counts and ETA (`SweepProgress`)."""

    def __init__(self, stage: str, kind: str, total: int, label, sweep: SweepProgress) -> None:
        self.stage, self.kind, self.total, self.label, self.done = stage, kind, total, label, 0
        self.sweep = sweep
        self.finished = 0  # trials whose trainable returned its final status, or that Ray gave up on
        self.errored = 0  # trials Ray gave up on (their logs under _ray/ are kept)
        self.gave_up: list | None = []  # their units, run once more by `_fit` (None then: a second error is final)
        self.last: dict = {}
        self.workers: dict[tuple, dict] = {}  # (node, pid) -> its units and latest cache counters
        self.t0 = time.perf_counter()
        self.extra: list[tune.Callback] = []  # the stage's other callbacks (`_Tracking`)
        self.held = 0  # the most trials Tune's controller held when one started (`Prune`)

    def worker_line(self) -> str:
        """How the stage's units spread over worker processes, and what their caches served."""
        w = self.workers.values()
        hits, misses = sum(x["hits"] for x in w), sum(x["misses"] for x in w)
        held = max((x["mb"] for x in w), default=0.0)
        return (
            f"[{self.stage}] {sum(x['units'] for x in w)} {self.kind} units ran in {len(w)} worker process(es);"
            f" worker cache: {hits} hits, {misses} misses, at most {held:.0f} MB held by a worker;"
            f" at most {self.held} trial(s) held by the driver at once"
        )

    def _prefix(self) -> str:
        return f"[{self.stage} {self.done}/{self.total} {time.perf_counter() - self.t0:6.0f}s]"

    def on_trial_start(self, iteration, trials, trial, **info):
        self.held = max(self.held, len(trials))  # Tune's own list
        self.sweep.started(self.kind, trial.trial_id)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.last[trial.trial_id] = result
        phase = result.get("phase")
        if phase == "zoo":  # donor training is the long part of a small sweep: show epochs
            line = f"epoch {result['epoch']}/{result['epochs']} train_loss={result['train_loss']:.3f}"
        elif phase == "fit":  # a long fit's heartbeat (the trial reports one at most every 30 s)
            line = f"fitting, epoch {result['epoch']}/{result['epochs']} train_loss={result['train_loss']:.3f}"
        else:
            return
        self.sweep.note(f"{self._prefix()} {self.label(trial.config)}: {line}")

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.done += 1
        r = self.last.pop(trial.trial_id, {})
        if "worker_pid" in r:
            w = self.workers.setdefault((r["worker_node"], r["worker_pid"]), {"units": 0})
            w.update(units=w["units"] + 1, hits=r["cache_hits"], misses=r["cache_misses"], mb=r["cache_mb"])
        status = r.get("status", "?")
        if "status" in r:
            self.finished += 1
        self.sweep.finished(self.kind, trial.trial_id, failed=status != "done" and status != "skipped")
        detail = r.get("error") if status == "failed" else _fmt_metrics(r)
        self.sweep.note(f"{self._prefix()} {self.label(trial.config)}: {status} {detail}")

    def on_trial_recover(self, iteration, trials, trial, **info):
        # Ray lost the trial (its node or worker died) and schedules it again; the trial is idempotent.
        self.sweep.note(
            f"[{self.stage} {self.done}/{self.total}] {self.label(trial.config)}: lost with its worker or"
            " node; retrying"
        )

    def on_trial_error(self, iteration, trials, trial, **info):
        self.finished += 1
        self.errored += 1
        if self.gave_up is not None:  # Tune errors a trial lost with its node when its dead actor's second
            # failed task arrives after the trial was requeued, whatever its retries left: run it again
            self.gave_up.append(trial.config["unit"])
            self.sweep.forget(self.kind, trial.trial_id)
            return self.sweep.note(f"[{self.stage}] {self.label(trial.config)}: ray error; it runs again later")
        self.done += 1
        self.sweep.finished(self.kind, trial.trial_id, failed=True)
        self.sweep.note(
            f"[{self.stage} {self.done}/{self.total}] {self.label(trial.config)}: ray error "
            f"(after retries); rerun with `stitchsweep resume`"
        )


class _Tracking(tune.Callback):
    """Each completed unit's record mirrored to the trackers (`sweep.backends.trackers`), from its parts: on the
    driver, after the unit wrote them; a tracker's failure is a printed note, never a failed unit."""

    def __init__(self, trackers: list, kind, units: dict, sweep_dir: SweepDir) -> None:
        self.trackers, self.kind, self.units, self.sweep_dir = trackers, kind, units, sweep_dir

    def on_trial_complete(self, iteration, trials, trial, **info):
        from sweep.backends.trackers import log_unit

        uid = trial.config["unit"]
        for note in log_unit(self.trackers, self.kind, uid, self.units[uid], self.sweep_dir):
            print(f"note: {note}", flush=True)


def _fmt_metrics(r: dict) -> str:
    parts = []
    for k in ("clean_acc", "robust_acc"):
        if r.get(k) is not None:
            parts.append(f"{k}={r[k]:.3f}")
    return " ".join(parts)


def _fit(
    name: str,
    trainable,
    grid: list[str],
    resources: dict,
    sweep_dir: SweepDir,
    progress: _Progress,
    max_concurrent: int | None,
) -> StageSummary:
    """Run one stage as one Tune experiment, fed its units in order as slots free (`StageUnits`)."""
    t0 = time.perf_counter()
    progress.sweep.phase(
        f"{name}: starting workers for {len(grid)} unit(s) (each imports PyTorch and loads its data before its first)"
    )
    if grid:
        _experiment(name, trainable, grid, resources, sweep_dir, progress, max_concurrent)
    again, progress.gave_up = progress.gave_up, None
    if again:  # idempotent trials: a unit whose part was written is skipped
        progress.sweep.note(f"[{name}] running again the {len(again)} unit(s) that Ray gave up on")
        _experiment(name, trainable, again, resources, sweep_dir, progress, max_concurrent)
    progress.sweep.note(progress.worker_line())
    progress.sweep.summary()
    return StageSummary(name, len(grid), time.perf_counter() - t0)


def _experiment(
    name: str,
    trainable,
    grid: list[str],
    resources: dict,
    sweep_dir: SweepDir,
    progress: _Progress,
    max_concurrent: int | None,
) -> None:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    finished_before, errored_before = progress.finished, progress.errored
    tuner = tune.Tuner(
        tune.with_resources(trainable, resources),
        tune_config=tune.TuneConfig(
            # One experiment for the whole stage: Tune asks for the next unit only when fewer than the slots'
            # count are live, so trials exist from their start on, not all at once.
            search_alg=StageUnits(grid),
            scheduler=Prune(),  # the driver holds the running trials, not the whole stage's
            num_samples=len(grid),
            max_concurrent_trials=slots(resources, ray.cluster_resources(), max_concurrent),
            # One actor runs trial after trial (they all ask for the same resources), so its donors,
            # splits and cached activations (`sweep.worker.cache`) serve every trial it runs.
            reuse_actors=True,
            trial_name_creator=unit_name,
            trial_dirname_creator=unit_name,
        ),
        run_config=tune.RunConfig(
            name=f"{name}-{stamp}",
            storage_path=sweep_dir.ray.path,
            storage_filesystem=None if sweep_dir.ray.is_local else sweep_dir.ray.fs,
            verbose=0,
            callbacks=[progress, *progress.extra, Forget()],
            # A trial lost with its node is retried; a trial's own errors are caught and recorded.
            failure_config=tune.FailureConfig(max_failures=2),
        ),
    )
    tuner.fit()
    # Tune handles Ctrl+C itself: it stops the running trials and returns normally. A trial that never
    # reported its final status was cut short; stop the whole sweep then instead of starting the next
    # stage on missing inputs.
    if progress.finished - finished_before < len(grid):
        raise KeyboardInterrupt(
            f"the {name} stage was interrupted with"
            f" {progress.total - progress.finished} of {progress.total} trials unfinished"
        )
    if progress.errored == errored_before:  # Ray's records of a clean run duplicate the parts: drop them
        _remove_quietly(sweep_dir.ray / f"{name}-{stamp}")


def unit_name(trial) -> str:
    """A trial's name and folder: its unit's id. A module-level function, so that Tune's snapshot of each trial
    names it (a lambda was pickled into every trial's JSON state, 1.3 KB each, twice)."""
    return str(trial.config["unit"])


def _remove_quietly(loc: Loc) -> None:
    try:
        loc.delete_tree()
    except OSError as exc:
        print(f"note: could not remove Ray's run records at {loc}: {exc}", flush=True)


def start_ray(address: str | None, num_cpus: int | None, runtime_env: dict | None = None) -> bool:
    """Join `address`, or start an embedded local Ray, with the job's `runtime_env` (the plugins' code).
    Returns whether we started it."""
    if ray.is_initialized():
        return False
    if address:
        _check_reachable(address)
        try:
            ray.init(address=address, log_to_driver=False, runtime_env=runtime_env)
        except ConnectionError as exc:
            hint = (
                "; if the cluster uses token authentication (the default of `ray start --head` in Ray 2.60),"
                " give this machine its token: RAY_AUTH_TOKEN, or the file ~/.ray/auth_token"
            )
            raise SpecError("--address", "a running Ray cluster", address, str(exc).splitlines()[0] + hint) from None
    else:
        start_lean(num_cpus, runtime_env)
    return True


def run_stages(
    sweep: Sweep,
    sweep_dir: SweepDir,
    plan: dict[str, list[str]],
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    max_concurrent: int | None = None,
    trackers: list | None = None,
) -> list[StageSummary]:
    """Run every kind's units of `plan` (kind name -> unit ids) as Ray Tune trials, one stage per kind, in
    registration order (a kind registers after the kinds it reads: `Kind.after`). Every kind goes through the
    same machinery: resources, retries on node loss, progress, one Tune experiment per stage fed as slots free.
    `trackers` (`sweep.backends.trackers.parse`): each completed unit's record is mirrored to them."""
    from sweep.registry import KINDS

    started = start_ray(address, num_cpus, plugin_env(sweep))
    try:
        phase("checking the cluster's resources and the results storage")
        alive = [n for n in ray.nodes() if n.get("Alive")]
        check_resources(sweep, [n["Resources"] for n in alive])
        check_storage_shared(sweep_dir, alive)
        if not started:  # a cluster: its workers' data root, seen from a worker (the driver checked an embedded one)
            check_data_on_a_worker(sweep)
        resources = trial_resources(sweep)
        env = worker_env(sweep)
        summaries = []
        names = [k for k in KINDS if plan.get(k)]
        totals, (prices, stage_s) = {k: (KINDS[k].noun, len(plan[k])) for k in names}, eta_prices(sweep, plan)
        sweep_progress = SweepProgress(totals, prices=prices, stage_s=stage_s)
        for name in names:
            summary = _run_stage(sweep, sweep_dir, plan, name, resources, env, sweep_progress, max_concurrent, trackers)
            if summary is not None:
                summaries.append(summary)
        sweep_progress.close()
        return summaries
    finally:
        if started:
            stop_lean()
        sys.stdout.flush()


def _run_stage(
    sweep: Sweep, sweep_dir: SweepDir, plan: dict, name: str, resources: dict, env: dict, sweep_progress,
    max_concurrent: int | None, trackers: list | None,
) -> StageSummary | None:  # fmt: skip
    """One kind's stage: its runnable units as Tune trials (None when none is runnable), then its end."""
    from sweep.kinds.base import resolve
    from sweep.registry import KINDS

    kind = KINDS[name]
    everything = kind.units(sweep)
    ready, blocked = runnable(sweep, sweep_dir, name, plan[name])  # after this run's donor stage
    if blocked:
        sweep_progress.skip(name, len(blocked))
        print(f"[{kind.stage}] {blocked_note(kind.noun, blocked)}", flush=True)
    if not ready:
        return None
    # Only what runs travels to the workers; units that share a front run one after the other
    # (`Kind.locality`), so a worker's cached activations serve them.
    order = sorted(ready, key=lambda uid: kind.locality(everything[uid])) if kind.locality else ready
    units = {uid: everything[uid] for uid in order}
    env["share"] = kind.shares_halves(units.values())  # are the node's cache files worth writing?
    trainable = tune.with_parameters(
        _trainable, run=kind.run, units=units, root=sweep_dir.root, sweep_name=sweep.name, env=env
    )
    label = lambda c: kind.label(units[c["unit"]])  # noqa: E731
    progress = _Progress(kind.stage, name, len(units), label, sweep_progress)
    if trackers:
        progress.extra.append(_Tracking(trackers, kind, units, sweep_dir))
    summary = _fit(kind.stage, trainable, list(units), resources, sweep_dir, progress, max_concurrent)
    compact_stage(kind.stage, sweep_dir)
    if kind.after_stage is not None:  # e.g. the end of the zoo stage: donors that learned nothing
        for line in resolve(kind.after_stage)(sweep, sweep_dir):
            print(f"[{kind.stage}] {line}", flush=True)
    return summary
