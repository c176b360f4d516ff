"""How a run's units reach Ray Tune: one experiment for the run, fed lazily by a search algorithm that hands out
the next pending unit whenever a slot frees, stage after stage, so the reused actors live as long as the run
(no new workers, and no idle barrier within a stage, however many units it has); and the driver's memory kept
to the running trials, since Tune keeps every trial of an experiment until its end."""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable

from ray.tune.experiment import Trial
from ray.tune.progress_reporter import TrialProgressCallback
from ray.tune.schedulers import FIFOScheduler
from ray.tune.search import Searcher

# Ray's names of the resources `sweep.backends.stage.trial_resources` asks for.
_CLUSTER_NAMES = {"cpu": "CPU", "gpu": "GPU", "memory": "memory"}


class SweepUnits(Searcher):
    """Tune's search algorithm for a run: each `suggest` is the current stage's next unit (`{"kind": k, "unit":
    uid}`); once the stage's units are handed out it waits (None) for the stage's last trial, then asks
    `next_units()` (the driver's end of one stage and start of the next: kind and unit ids, None after the
    last) and says `FINISHED` at the end. A trial Ray retries after a node loss keeps its config: it is not
    suggested again."""

    def __init__(self, next_units: Callable[[], tuple[str, list[str]] | None]) -> None:
        super().__init__()
        self.next_units, self.kind, self.units, self.handed = next_units, "", [], 0
        self.live: set[str] = set()  # the trials handed out and not yet ended
        self.finished = False
        self.max_concurrent: float = math.inf  # Tune sets it (`max_concurrent_trials`)
        self.placement = None  # `sweep.backends.placement.Placement`: which unit next, and on which node

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """Tune's `ConcurrencyLimiter` leaves the limit to this searcher, so one set of live trials is kept
        (and `settle` corrects it)."""
        self.max_concurrent = max_concurrent
        return True

    def settle(self, trials) -> list:
        """Tune's `trials` that ended without telling the searcher (Tune errors a trial whose reused actor
        could not be reset, and says so to no one): they leave `live`, else the stage would wait for them."""
        ended = [t for t in trials if t.trial_id in self.live and t.is_finished()]
        for t in ended:
            self.on_trial_complete(t.trial_id)
        return ended

    def suggest(self, trial_id: str) -> dict | str | None:
        if len(self.live) >= self.max_concurrent:
            return None
        while self.handed >= len(self.units):
            if self.finished:
                return Searcher.FINISHED
            if self.live:
                return None  # the stage's last trials run: the next stage reads what they write
            nxt = self.next_units()
            if nxt is None:
                self.finished = True
                return Searcher.FINISHED
            (self.kind, self.units), self.handed = nxt, 0
        config = {"kind": self.kind}
        if self.placement is not None:  # the next unit whose node has a free slot, pinned there
            i, node = self.placement.pick(self.kind, self.units, self.handed, trial_id)
            if i != self.handed:
                self.units.insert(self.handed, self.units.pop(i))
            config.update({"node": node} if node else {})
        config["unit"] = self.units[self.handed]
        self.handed += 1
        self.live.add(trial_id)
        return config

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        self.live.discard(trial_id)  # nothing to learn: the order is the stage's (`Kind.locality`)
        if self.placement is not None:
            self.placement.ended(trial_id)

    # Tune saves its search algorithm with each experiment-state snapshot (and warns when it cannot); `resume`
    # reads the Parquet parts, never this.
    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump((self.kind, self.units, self.handed), f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.kind, self.units, self.handed = pickle.load(f)


def slots(resources: dict, cluster: dict, max_concurrent: int | None) -> int:
    """How many units run at once: `max_concurrent` when given, else how many units' `resources` (the
    `trial_resources` keys) fit in the `cluster`'s totals (`ray.cluster_resources()`), at least 1. Tune asks
    the search algorithm for a new unit only when fewer than this many are live."""
    return max_concurrent or max(1, units_fit(resources, cluster))


def units_fit(resources: dict, have: dict) -> int:
    """How many units asking for `resources` (`trial_resources`' keys) fit in `have` (Ray's resource names: a
    cluster's totals or one node's); 1 when they ask for none of them."""
    fits = [
        math.floor(have.get(_CLUSTER_NAMES[key], 0.0) / need + 1e-9)
        for key, need in resources.items()
        if need and key in _CLUSTER_NAMES
    ]
    return min(fits, default=1)


class Forget(TrialProgressCallback):
    """Takes the place of Tune's own progress callback (which at `verbose=0` prints nothing, yet formats every
    result and keeps each trial in three dicts), and drops a finished trial's results from the driver (the
    last result and Tune's running statistics of each metric), keeping its config and status: Tune holds
    every trial of an experiment to its end, and the Parquet parts, not Tune's copies, are the record. Listed
    after the callbacks that read the results."""

    def on_trial_result(self, iteration, trials, trial, result, **info):
        pass

    def on_trial_complete(self, iteration, trials, trial, **info):
        _forget(trial)

    def on_trial_error(self, iteration, trials, trial, **info):
        _forget(trial)


def _forget(trial) -> None:
    meta = trial.run_metadata
    # Per metric, Tune's statistics hold a dict and two deques (last 5 and 10 values): most of a trial's bytes.
    meta.metric_analysis, meta.metric_n_steps = {}, {}
    # The last result's keys beyond these only fed our callbacks; "done" keeps Tune from asking the (gone or
    # reused) actor for default metrics when it reads `trial.last_result` later.
    kept = {k: v for k, v in meta.last_result.items() if k in ("trial_id", "done", "training_iteration")}
    meta.last_result = kept | {"done": True}
    meta.invalidate_cache()
    trial._state_json = None  # a cached JSON of its state, from an experiment-state snapshot
    # The reference to the default metrics Tune asks each trial's actor for when it gets one (never read once
    # the trial reported): it would keep the object, and its entry in Ray's reference table, to the end.
    trial._default_result_or_future = None


class Prune(FIFOScheduler):
    """Tune's first-in-first-out scheduler that also takes each finished trial out of the driver's controller
    once Tune has stopped it (at the next trial Tune adds). Tune keeps every trial of an experiment to its end,
    serialises each to JSON for its snapshots (kept, one string per trial) and reads them all into an
    `ExperimentAnalysis` when `fit` returns: the driver's memory grew with the stage's size, not its slots. A
    stage's record is its Parquet parts; a trial that errored stays (its error is reported at the end)."""

    def __init__(self) -> None:
        super().__init__()
        self.finished: list[Trial] = []
        self.placement = None  # `sweep.backends.placement.Placement`: units pinned to a node that is gone move

    def choose_trial_to_run(self, tune_controller) -> Trial | None:
        if self.placement is not None:
            controller = tune_controller._tune_controller
            self.placement.reserve(controller._actor_cache)
            waiting = [t for t in controller._trials if t.status == Trial.PENDING] if self.placement.live else []
            for trial in self.placement.stranded(waiting):
                restage(controller, trial, self.placement.repin(trial))
        return super().choose_trial_to_run(tune_controller)

    def on_trial_complete(self, tune_controller, trial: Trial, result: dict) -> None:
        if trial not in self.finished:  # a trial requeued after its stop failed completes again
            self.finished.append(trial)

    def on_trial_add(self, tune_controller, trial: Trial) -> None:
        # Tune's controller behind the wrapper it hands its schedulers (Ray 2.60: `TrialRunnerWrapper`)
        self.finished = prune(tune_controller._tune_controller, self.finished)


def prune(controller, finished: list[Trial]) -> list[Trial]:
    """Drop from Tune's `controller` each of the `finished` trials that it has stopped and detached from its
    actor; returns those it still uses."""
    kept = []
    for trial in finished:
        if trial.status != Trial.TERMINATED or trial in controller._trial_to_actor or trial in controller._live_trials:
            kept.append(trial)
            continue
        if trial in controller._trials:
            controller._trials.remove(trial)
        controller._stopped_trials.discard(trial)
        controller._trials_to_cache.discard(trial)
        controller._trial_metadata.pop(trial.trial_id, None)  # its JSON state from a snapshot
    return kept


def restage(controller, trial: Trial, resources) -> None:
    """Give a pending trial of Tune's `controller` new `resources`, withdrawing the actor Tune asked Ray for
    with the old ones (as Tune does when it reuses a cached actor for a staged trial): its node is gone."""
    if trial in controller._staged_trials:
        controller._staged_trials.discard(trial)
        controller._actor_cache.decrease_max(trial.placement_group_factory)
    actor = controller._trial_to_actor.pop(trial, None)
    if actor is not None:
        controller._actor_to_trial.pop(actor, None)
        controller._remove_actor(tracked_actor=actor)
    trial.update_resources(resources)
