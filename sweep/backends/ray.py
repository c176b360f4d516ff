"""The module that schedules the units of every kind of work as Tune trials (with `checks.py` and `node.py`, the
only modules that import Ray).

One stage per registered kind with work to do (`sweep.kinds`: the zoo stage of donors first, then the kinds
that read them: stitching trials, representation-test units), all in one Tune experiment whose trials are the
kinds' units without a usable Parquet part, handed to Tune as slots free and stage after stage
(`sweep.backends.feed`), so the workers that ran a stage run the next one. Ray's own
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
from ray._common.usage import usage_lib  # noqa: E402
from ray.air._internal import usage as air_usage  # noqa: E402
from ray.tune.execution import class_cache  # noqa: E402

from sweep.backends.checks import check_data_on_a_worker, check_resources, check_storage_shared  # noqa: E402
from sweep.backends.disk_full import StopOnDiskFull  # noqa: E402
from sweep.backends.events import StageEvents, Tracking
from sweep.backends.feed import Forget, Prune, SweepUnits  # noqa: E402
from sweep.backends.fit import fitted  # noqa: E402
from sweep.backends.kills import recorder, stop_on_sigterm  # noqa: E402
from sweep.backends.node import lean_node, start_ray, stop_lean  # noqa: E402
from sweep.backends.placement import Placement, enabled  # noqa: E402
from sweep.backends.progress import SweepProgress, phase  # noqa: E402
from sweep.backends.stage import compact_stage, eta_prices, plugin_env, worker_env  # noqa: E402
from sweep.config.space import Sweep  # noqa: E402
from sweep.planning.planning import blocked_note, runnable  # noqa: E402
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


def _tag_callbacks(callbacks, _tag=air_usage.tag_callbacks) -> bool:
    """Tune's count of an experiment's callbacks for Ray's usage statistics, only where they are on: the count
    imports every tracker integration Ray knows of (MLflow's: 1.1 s before each sweep's first unit), and the
    lean node turns the statistics off."""
    return _tag(callbacks) if usage_lib.usage_stats_enabled() else False


air_usage.tag_callbacks = _tag_callbacks  # `ray.tune.tune` looks it up on the module when it runs


def _actor_class(cache, trainable_cls, _get=class_cache._ActorClassCache.get):
    """Tune's actor class of a trainable, without Tune's `runtime_env` on the embedded node. Tune gives every
    trial actor one (`env_vars`: a few of the driver's variables), and a worker serves only actors of its own
    runtime environment, so the node's workers, started with the raylet while the driver imports Tune, could
    not take the first trials: each one waited for a fresh worker's imports (and the idle ones were killed).
    On the embedded node the workers inherit the driver's environment already (`sweep.backends.node`)."""
    if not lean_node():
        return _get(cache, trainable_cls)
    if trainable_cls not in cache._cache:
        cache._cache[trainable_cls] = ray.remote(trainable_cls)
    return cache._cache[trainable_cls]


class_cache._ActorClassCache.get = _actor_class  # the controller calls it on its own instance


@dataclass
class StageSummary:
    stage: str
    scheduled: int
    wall_s: float


def _threads(cpus: float) -> int:
    return max(1, int(cpus))


def _trainable(config: dict, kinds: dict, units: dict, root: Loc, sweep_name: str, env: dict) -> None:
    """One unit (`config`: its kind and id) on a worker: its kind's own `run` (the `Kind` shipped by value or by
    reference, as cloudpickle sees fit; a "module:function" name is imported here), its progress forwarded to
    Tune. A unit whose code raises is recorded failed (`run_recorded`): only a lost worker is retried by Tune."""
    import torch

    from sweep.config.plugins import import_on_worker
    from sweep.data import stream
    from sweep.kinds.base import RunContext, run_recorded
    from sweep.worker.cache import configure
    from sweep.worker.release import enter_stage, trim_heap  # a reused actor keeps what it cached, per stage

    import_on_worker(env["plugins"])  # registries are per process: the plugins register here too

    torch.set_num_threads(_threads(env["cpus"]))
    stream.configure(stream.loader_workers(env["cpus"]))  # image folders' decoding processes, from its CPUs
    kind = config["kind"]
    cache = enter_stage(kind, kinds[kind], configure(env["cache"], env["share"][kind]))  # the driver's settings
    ctx = RunContext(
        SweepDir(root, sweep_name),
        torch.device("cuda" if env["gpu"] and torch.cuda.is_available() else "cpu"),
        env["data_root"],
        env["download"],
        report=lambda m: tune.report(m),
    )
    out = run_recorded(kinds[kind], units[kind][config["unit"]], ctx)
    trim_heap()  # the unit's temporaries: not carried as resident memory into the next unit or stage
    worker = {"worker_pid": os.getpid(), "worker_node": ray.get_runtime_context().get_node_id()}
    st = cache.stats
    worker.update(cache_hits=st.hits + st.disk_hits, cache_misses=st.misses, cache_mb=cache.bytes / 2**20)
    tune.report({"status": out.get("status", "skipped"), **{k: v for k, v in out.items() if k != "status"}, **worker})


class _Stages(tune.Callback):
    """The run's stages, one after another in its one Tune experiment. `next` is what the feed asks once every
    unit handed out has finished: the units of the current stage that Ray gave up on (once more), else the end
    of the stage (compaction, the kind's `after_stage`) and the next stage's runnable units (a donor that
    failed blocks its trials), None after the last. As a Tune callback it passes each trial's events to its
    stage's `StageEvents` (and trackers)."""

    def __init__(self, sweep: Sweep, sweep_dir: SweepDir, plan: dict, units: dict, sweep_progress, trackers) -> None:
        from sweep.registry import KINDS

        self.sweep, self.sweep_dir, self.plan, self.units = sweep, sweep_dir, plan, units
        self.sweep_progress, self.trackers = sweep_progress, trackers
        self.ahead = [k for k in KINDS if plan.get(k)]
        self.events: dict[str, list] = {}  # kind -> its StageEvents, then its Tracking
        self.current: str | None = None
        self.feed: SweepUnits | None = None  # what hands out the units (`_experiment` sets it)
        self.summaries: list[StageSummary] = []
        self.t0 = time.perf_counter()
        self.disk = StopOnDiskFull()  # a worker's full disk stops the run
        self.placement: Placement | None = None  # which node holds which frozen half (`_experiment` sets it)

    def next(self) -> tuple[str, list[str]] | None:
        if self.current is not None:
            events = self.events[self.current][0]
            again, events.gave_up = events.gave_up, None  # a second give-up is final
            if again:  # idempotent trials: a unit whose part was written is skipped
                self.sweep_progress.note(f"[{events.stage}] running again the {len(again)} unit(s) that Ray gave up on")
                return self.current, again
            self._end(self.current)
        while self.ahead:
            name = self.ahead.pop(0)
            order = self._open(name)
            if order:
                self.current = name
                return name, order
        self.current = None
        return None

    def _open(self, name: str) -> list[str]:
        """A stage's runnable units in the kind's locality order (units that share a front run one after the
        other, so a worker's cached activations serve them); its events."""
        from sweep.registry import KINDS

        kind, units = KINDS[name], self.units[name]
        ready, blocked = runnable(self.sweep, self.sweep_dir, name, self.plan[name])  # after the stages before
        if blocked:
            self.sweep_progress.skip(name, len(blocked))
            print(f"[{kind.stage}] {blocked_note(kind.noun, blocked)}", flush=True)
        if not ready:
            return []
        order = sorted(ready, key=lambda uid: kind.locality(units[uid])) if kind.locality else ready
        label = lambda c: kind.label(units[c["unit"]])  # noqa: E731
        record = recorder(kind, units, self.sweep, self.sweep_dir)  # a unit killed for memory: recorded failed
        events = StageEvents(kind.stage, name, len(order), label, self.sweep_progress, record)
        self.events[name] = [events] + ([Tracking(self.trackers, kind, units, self.sweep_dir)] if self.trackers else [])
        if not self.summaries:
            self.sweep_progress.phase(
                f"{kind.stage}: starting workers for {len(order)} unit(s) (each imports PyTorch and loads its data"
                " before its first)"
            )
        else:  # Tune keeps one idle actor between stages (more start as slots free)
            self.sweep_progress.phase(f"{kind.stage}: {len(order)} unit(s), on a worker of the stage before")
        self.t0 = time.perf_counter()
        return order

    def _end(self, name: str) -> None:
        from sweep.kinds.base import resolve
        from sweep.registry import KINDS

        kind, events = KINDS[name], self.events[name][0]
        self.sweep_progress.note(events.worker_line())
        if self.placement is not None and (line := self.placement.line(name)):
            print(f"[{kind.stage}] {line}", flush=True)
        self.sweep_progress.summary()
        compact_stage(kind.stage, self.sweep_dir)
        if kind.after_stage is not None:  # e.g. the end of the zoo stage: donors that learned nothing
            for line in resolve(kind.after_stage)(self.sweep, self.sweep_dir):
                print(f"[{kind.stage}] {line}", flush=True)
        self.summaries.append(StageSummary(kind.stage, events.total, time.perf_counter() - self.t0))

    def interrupted(self) -> str | None:
        """After the experiment: what Ctrl+C or SIGTERM (which Tune handles, stopping the running trials) left
        undone."""
        if self.current is None and not self.ahead:
            return None
        if self.current is None:
            from sweep.registry import KINDS

            return f"the sweep was interrupted before its {KINDS[self.ahead[0]].stage} stage"
        events = self.events[self.current][0]
        return (
            f"the {events.stage} stage was interrupted with {events.total - events.finished} of {events.total}"
            " trials unfinished"
        )

    def errored(self) -> int:
        return sum(e[0].errored for e in self.events.values())

    def _send(self, event: str, trial, *args, **info) -> None:
        for callback in self.events[trial.config["kind"]]:
            getattr(callback, event)(*args, trial=trial, **info)

    def on_trial_start(self, iteration, trials, trial, **info):
        self._send("on_trial_start", trial, iteration, trials, **info)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if "worker_node" in result and self.placement is not None:  # a unit's last report: where it ran
            c = trial.config
            self.placement.ran(c["kind"], c["unit"], result["worker_node"], self.placement.live.get(trial.trial_id))
        self._send("on_trial_result", trial, iteration, trials, result=result, **info)

    def on_trial_complete(self, iteration, trials, trial, **info):
        self._send("on_trial_complete", trial, iteration, trials, **info)

    def on_step_begin(self, iteration, trials, **info):
        for trial in self.feed.settle(trials) if self.feed else ():  # ended unheard: Ray gave up on it
            if trial.config["kind"] in self.events:
                self._send("on_trial_error", trial, iteration, trials, **info)

    def on_trial_recover(self, iteration, trials, trial, **info):
        if self.feed:  # retried: live again, even where its stop had already told the searcher it ended
            self.feed.live.add(trial.trial_id)
        if self.disk.check(trial):  # not retried: the run stops
            return
        self._send("on_trial_recover", trial, iteration, trials, **info)

    def on_trial_error(self, iteration, trials, trial, **info):
        if not self.disk.check(trial):
            self._send("on_trial_error", trial, iteration, trials, **info)


def _experiment(name: str, trainable, stages, placement: Placement, sweep_dir: SweepDir, slots_: int) -> None:
    """Every stage of the run as one Tune experiment `name`: `stages.next` feeds it (`SweepUnits`), `stages` hears
    its events, `placement` pins units to nodes. Raises KeyboardInterrupt when Ctrl+C left units undone."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    stages.feed, stages.placement, prune = SweepUnits(stages.next), placement, Prune()
    stages.feed.placement = prune.placement = placement
    tuner = tune.Tuner(
        tune.with_resources(trainable, placement.pinned),  # each unit's resources, and its node's where pinned
        tune_config=tune.TuneConfig(
            # Tune asks for the next unit only when fewer than `slots_` are live, so trials exist from their
            # start on, not all at once; between stages the feed waits for the stage's last trial.
            search_alg=stages.feed,
            num_samples=-1,  # as many as the feed hands out: it says when it is finished
            max_concurrent_trials=slots_,
            scheduler=prune,  # the driver holds the running trials, not the whole run's
            # One actor runs trial after trial, stage after stage (they ask for the same resources; pinned, those
            # of one node do), so its donors, splits and cached activations (`sweep.worker.cache`) serve them all.
            reuse_actors=True,
            trial_name_creator=unit_name,
            trial_dirname_creator=unit_name,
        ),
        run_config=tune.RunConfig(
            name=f"{name}-{stamp}",
            storage_path=sweep_dir.ray.path,
            storage_filesystem=None if sweep_dir.ray.is_local else sweep_dir.ray.fs,
            verbose=0,
            callbacks=[stages, Forget()],
            stop=stages.disk,
            # A trial lost with its node is retried (not one killed for memory: `sweep.backends.events`); a
            # trial's own errors are caught and recorded.
            failure_config=tune.FailureConfig(max_failures=2),
        ),
    )
    tuner.fit()
    if stages.disk.error is not None:  # one line, EXIT_DISK_FULL (`sweep.cli.commands.stops_on_disk_full`)
        raise stages.disk.error
    # Tune handles Ctrl+C (and SIGTERM, `sweep.backends.kills`) itself: it stops the running trials and returns
    # normally. A stage cut short stops the whole sweep instead of starting the next stage on missing inputs.
    stop = stages.interrupted()
    if stop:
        raise KeyboardInterrupt(stop)
    if not stages.errored():  # Ray's records of a clean run duplicate the parts: drop them
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
    same machinery: resources, retries on node loss, progress, and one Tune experiment for the whole run, fed
    as slots free, stage after stage, on the same workers.
    `trackers` (`sweep.backends.trackers.parse`): each completed unit's record is mirrored to them."""
    from sweep.registry import KINDS

    started = start_ray(address, num_cpus, plugin_env(sweep))
    stop_on_sigterm()  # SIGTERM stops the run as Ctrl+C does (`ray.init` put an immediate exit in its place)
    try:
        phase("checking the cluster's resources and the results storage")
        alive = [n for n in ray.nodes() if n.get("Alive")]
        check_resources(sweep, [n["Resources"] for n in alive])
        resources, at_once = fitted(sweep, plan, [n["Resources"] for n in alive], max_concurrent)  # or refused
        check_storage_shared(sweep_dir, alive)
        if not started:  # a cluster: its workers' data root, seen from a worker (the driver checked an embedded one)
            check_data_on_a_worker(sweep)
        names = [k for k in KINDS if plan.get(k)]
        if not names:
            return []
        totals, (prices, stage_s) = {k: (KINDS[k].noun, len(plan[k])) for k in names}, eta_prices(sweep, plan)
        sweep_progress = SweepProgress(totals, prices=prices, stage_s=stage_s)
        units = {k: _planned(KINDS[k], sweep, plan[k]) for k in names}
        stages = _Stages(sweep, sweep_dir, plan, units, sweep_progress, trackers)
        env = worker_env(sweep)
        # is a kind's node cache worth writing (do two of its units read the same frozen half)?
        env["share"] = {k: KINDS[k].shares_halves(list(u.values())) for k, u in units.items()}
        trainable = tune.with_parameters(
            _trainable, kinds={k: KINDS[k] for k in units}, units=units, root=sweep_dir.root,
            sweep_name=sweep.name, env=env,
        )  # fmt: skip
        name = "+".join(KINDS[k].stage for k in names)
        placement = Placement(KINDS, units, resources, lambda: ray.nodes(), enabled())
        _experiment(name, trainable, stages, placement, sweep_dir, at_once)
        sweep_progress.close()
        return stages.summaries
    finally:
        if started:
            stop_lean()
        sys.stdout.flush()


def _planned(kind, sweep: Sweep, ids: list[str]) -> dict:
    """The kind's planned units by id: only what may run travels to the workers."""
    everything = kind.units(sweep)
    return {uid: everything[uid] for uid in ids}
