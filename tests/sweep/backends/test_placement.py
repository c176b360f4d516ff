"""Units placed on the node that holds their frozen halves, without Ray: nodes as `ray.nodes()` lists them, units
of two stages (donors that leave halves on their node, trials that read them), and a node lost."""

from types import SimpleNamespace

import pytest

pytest.importorskip("ray.tune")

from ray.tune.experiment.trial import Trial  # noqa: E402
from ray.tune.search import ConcurrencyLimiter  # noqa: E402

from sweep.backends.feed import SweepUnits, restage  # noqa: E402
from sweep.backends.placement import PREFIX, SLIVER, Pinned, Placement, enabled, handles, slots_of  # noqa: E402
from sweep.config.errors import SpecError  # noqa: E402


def _node(nid, ip="10.0.0.1", cpus=2.0, alive=True, **extra):
    return {
        "NodeID": nid,
        "Alive": alive,
        "NodeManagerAddress": ip,
        "Resources": {"CPU": cpus, f"node:{ip}": 1.0, **extra},
    }


def test_a_node_is_named_by_its_own_resource_else_by_an_address_no_other_node_has():
    head = _node("h", "10.0.0.1", **{"node:__internal_head__": 1.0})
    assert handles([head, _node("w", "10.0.0.2")]) == {"h": "node:10.0.0.1", "w": "node:10.0.0.2"}
    # several nodes on one machine share its address: only a resource of their own names them
    same = [_node("h", **{f"{PREFIX}head": 1.0}), _node("w", **{f"{PREFIX}w1": 1.0}), _node("x")]
    assert handles(same) == {"h": f"{PREFIX}head", "w": f"{PREFIX}w1"}
    assert handles([_node("h"), _node("w", alive=False)]) == {"h": "node:10.0.0.1"}  # a dead node shares nothing
    # both have the same resource and the same address: neither is named
    assert handles([_node("h", **{f"{PREFIX}a": 1.0}), _node("w", **{f"{PREFIX}a": 1.0})]) == {}


def test_a_node_holds_as_many_units_as_its_scarcest_resource_allows():
    node = {"Resources": {"CPU": 16.0, "GPU": 2.0, "memory": 64 * 2**30}}
    assert slots_of(node, {"cpu": 4, "gpu": 0}) == 4
    assert slots_of(node, {"cpu": 4, "gpu": 1}) == 2
    assert slots_of(node, {"cpu": 1, "gpu": 0, "memory": 24 * 2**30}) == 2


def test_the_switch_is_on_by_default_and_a_bad_value_names_the_variable():
    assert enabled({}) and enabled({"STITCHSWEEP_PLACEMENT": "ON"}) and not enabled({"STITCHSWEEP_PLACEMENT": "off"})
    with pytest.raises(SpecError, match="STITCHSWEEP_PLACEMENT"):
        enabled({"STITCHSWEEP_PLACEMENT": "maybe"})


def test_a_pinned_unit_asks_for_a_sliver_of_its_node_and_an_unpinned_one_for_its_resources_alone():
    pinned = Pinned({"cpu": 1, "gpu": 0})
    assert pinned.request(None) == {"cpu": 1, "gpu": 0}
    assert pinned.request("node:10.0.0.2") == {"cpu": 1, "gpu": 0, "node:10.0.0.2": SLIVER}
    (bundle,) = pinned({"kind": "k", "unit": "u", "node": "node:10.0.0.2"}).bundles
    assert bundle["CPU"] == 1 and bundle["node:10.0.0.2"] == SLIVER
    (bundle,) = pinned({"kind": "k", "unit": "u"}).bundles
    assert not any(k.startswith("node:") for k in bundle)


# Two stages as the engine runs them: donors leave the halves their pass fills on their node, trials read the
# halves of their front and end donors.
DONORS = {"da": ("a",), "db": ("b",)}
TRIALS = {"t_aa": ("a", "a"), "t_ba": ("b", "a"), "t_ab": ("a", "b"), "t_bb": ("b", "b")}
KINDS = {
    "donor": SimpleNamespace(halves=None, leaves=lambda d: tuple((k, "p") for k in d)),
    "trial": SimpleNamespace(halves=lambda t: ((t[0], "p"), (t[1], "p")), leaves=None),
}
UNITS = {"donor": DONORS, "trial": TRIALS}


class Cluster:
    def __init__(self, *nodes):
        self.nodes = list(nodes)

    def __call__(self):
        return self.nodes


def _placement(cluster, on=True, resources=None):
    return Placement(KINDS, UNITS, resources or {"cpu": 1, "gpu": 0}, cluster, on)


def test_each_trial_goes_to_the_node_that_holds_its_front_while_it_has_a_free_slot():
    one, two = _node("n1", "10.0.0.1", cpus=1), _node("n2", "10.0.0.2", cpus=1)
    p = _placement(Cluster(one, two))
    assert p.active and p.slots == {"n1": 1, "n2": 1}
    # the donors: nothing held yet, each to the node with the most free slots
    assert p.pick("donor", ["da", "db"], 0, "z1") == (0, "node:10.0.0.1")
    assert p.pick("donor", ["da", "db"], 1, "z2") == (1, "node:10.0.0.2")
    p.ran("donor", "da", "n1", "node:10.0.0.1"), p.ran("donor", "db", "n2", "node:10.0.0.2")
    p.ended("z1"), p.ended("z2")
    assert p.home("trial", "t_ab") == "n1" and p.home("trial", "t_ba") == "n2"
    order = ["t_aa", "t_ab", "t_ba", "t_bb"]  # the stage's locality order: by front
    assert p.pick("trial", order, 0, "x1") == (0, "node:10.0.0.1")
    # n1 is full: the first unit ahead whose halves n2 holds goes there (t_bb: both; t_ba's end is on n1)
    assert p.pick("trial", order, 1, "x2") == (3, "node:10.0.0.2")
    p.ran("trial", "t_aa", "n1", "node:10.0.0.1"), p.ran("trial", "t_bb", "n2", "node:10.0.0.2")
    p.ended("x1"), p.ended("x2")
    assert p.pick("trial", ["t_ab", "t_ba"], 0, "x3") == (0, "node:10.0.0.1")  # front a: n1
    assert p.pick("trial", ["t_ab", "t_ba"], 1, "x4") == (1, "node:10.0.0.2")  # front b: n2
    p.ran("trial", "t_ab", "n1", "node:10.0.0.1"), p.ran("trial", "t_ba", "n2", "node:10.0.0.2")
    assert p.tally["trial"] == {"units": 4, "home": 2, "away": 2, "moved": 0}  # a cross pair reads both nodes
    line = p.line("trial")
    assert (
        "units pinned to the node" in line
        and "2 of 4 units ran on a node that held" in line
        and "2 computed them again" in line
    )


def test_with_every_home_busy_a_free_node_takes_the_next_unit_and_computes_its_halves():
    one, two = _node("n1", "10.0.0.1", cpus=2), _node("n2", "10.0.0.2", cpus=1)
    p = _placement(Cluster(one, two))
    p.ran("donor", "da", "n1", None)
    p.ran("donor", "db", "n1", None)  # both fronts on n1
    order = ["t_aa", "t_ab", "t_ba", "t_bb"]
    assert p.pick("trial", order, 0, "x1")[1] == "node:10.0.0.1"
    assert p.pick("trial", order, 1, "x2")[1] == "node:10.0.0.1"
    assert p.pick("trial", order, 2, "x3") == (2, "node:10.0.0.2")  # n1 full, n2 idle: not left waiting
    assert p.pick("trial", order, 3, "x4") == (3, "node:10.0.0.1")  # no slot free: it waits for one there
    p.ran("trial", "t_ba", "n2", "node:10.0.0.2")
    assert p.tally["trial"]["away"] == 1 and p.held[("b", "p")] == {"n1", "n2"}  # n2 holds it now too


def test_without_two_named_nodes_or_switched_off_nothing_is_pinned_yet_placement_is_counted():
    p = _placement(Cluster(_node("n1"), _node("n2")))  # one address, no resource of their own
    assert not p.active and p.pick("trial", ["t_aa"], 0, "x") == (0, None)
    off = _placement(Cluster(_node("n1", "10.0.0.1"), _node("n2", "10.0.0.2")), on=False)
    assert not off.active and off.pick("donor", ["da"], 0, "z") == (0, None)
    off.ran("donor", "da", "n1", None)
    off.ran("trial", "t_aa", "n2", None)
    off.ran("trial", "t_ab", "n1", None)
    assert "not pinned" in off.line("trial") and "1 of 2 units ran on a node that held" in off.line("trial")
    mixed = _placement(Cluster(_node("n1", "10.0.0.1"), _node("n2", "10.0.0.2"), _node("n3", "10.0.0.2")))
    assert not mixed.active  # n2 and n3 share an address: pinning to n1 alone would leave them idle
    single = _placement(Cluster(_node("n1")))
    single.ran("donor", "da", "n1", None), single.ran("trial", "t_aa", "n1", None)
    assert single.line("trial") is None  # one machine: nothing to say


def test_a_unit_pinned_to_a_lost_node_moves_to_a_live_one():
    one, two = _node("n1", "10.0.0.1", cpus=1), _node("n2", "10.0.0.2", cpus=1)
    cluster = Cluster(one, two)
    p = _placement(cluster)
    p.ran("donor", "da", "n2", None)
    _, handle = p.pick("trial", ["t_aa"], 0, "x1")
    assert handle == "node:10.0.0.2"
    trial = Trial("sleep", config={"kind": "trial", "unit": "t_aa", "node": handle}, stub=True, trial_id="x1")
    assert p.stranded([trial]) == []
    cluster.nodes = [one, dict(two, Alive=False)]
    p.checked = float("-inf")  # as when the refresh interval has passed
    assert p.stranded([trial]) == [trial]
    (bundle,) = p.repin(trial).bundles
    assert bundle.get("node:10.0.0.1") == SLIVER and "node:10.0.0.2" not in bundle
    assert p.live["x1"] == "node:10.0.0.1" and p.stranded([trial]) == []


def test_restage_withdraws_the_actor_tune_asked_for_and_sets_the_new_resources():
    trial = Trial("sleep", config={"kind": "trial", "unit": "u"}, stub=True)
    removed, decreased = [], []
    controller = SimpleNamespace(
        _staged_trials={trial},
        _trial_to_actor={trial: "actor"},
        _actor_to_trial={"actor": trial},
        _actor_cache=SimpleNamespace(decrease_max=decreased.append),
        _remove_actor=lambda tracked_actor: removed.append(tracked_actor),
    )
    new = Pinned({"cpu": 1, "gpu": 0})({"node": "node:10.0.0.1"})
    restage(controller, trial, new)
    assert removed == ["actor"] and len(decreased) == 1 and not controller._staged_trials
    assert not controller._trial_to_actor and not controller._actor_to_trial
    assert trial.placement_group_factory == new


def test_restage_uses_what_tunes_controller_has():
    import inspect

    from ray.tune.execution.tune_controller import TuneController
    from ray.tune.utils.object_cache import _ObjectCache

    source = inspect.getsource(TuneController.__init__)
    for name in ("_staged_trials", "_trial_to_actor", "_actor_to_trial", "_actor_cache"):
        assert f"self.{name}:" in source or f"self.{name} =" in source, name
    assert "tracked_actor" in inspect.signature(TuneController._remove_actor).parameters
    assert callable(_ObjectCache.decrease_max)


def test_the_feed_hands_out_the_unit_placement_picks_with_its_node():
    one, two = _node("n1", "10.0.0.1", cpus=1), _node("n2", "10.0.0.2", cpus=1)
    p = _placement(Cluster(one, two))
    p.ran("donor", "db", "n2", None)
    p.ran("donor", "da", "n1", None)
    searcher = SweepUnits(lambda: ("trial", ["t_aa", "t_ab", "t_ba"]) if not searcher.kind else None)
    searcher.placement = p
    feed = ConcurrencyLimiter(searcher, max_concurrent=2)
    assert feed.suggest("x1") == {"kind": "trial", "node": "node:10.0.0.1", "unit": "t_aa"}
    assert feed.suggest("x2") == {"kind": "trial", "node": "node:10.0.0.2", "unit": "t_ba"}  # n1 is full
    feed.on_trial_complete("x1", result={})
    assert "x1" not in p.live
    assert feed.suggest("x3") == {"kind": "trial", "node": "node:10.0.0.1", "unit": "t_ab"}


def test_each_named_node_keeps_its_idle_actors_while_units_are_pinned_and_lets_them_go_after():
    from collections import Counter

    one, two = _node("n1", "10.0.0.1", cpus=2), _node("n2", "10.0.0.2", cpus=1)
    cluster = Cluster(one, two)
    p = _placement(cluster)
    kept = Counter()
    cache = SimpleNamespace(
        increase_max=lambda k, by: kept.update({k: by}), decrease_max=lambda k, by: kept.subtract({k: by})
    )
    p.reserve(cache), p.reserve(cache)  # every step: once per node
    assert kept == {p.pinned({"node": "node:10.0.0.1"}): 2, p.pinned({"node": "node:10.0.0.2"}): 1}
    cluster.nodes = [one, two, _node("n3", "10.0.0.2")]  # an unnamed node joins: units are no longer pinned
    p.refresh(force=True)
    p.reserve(cache)
    assert not p.active and all(v == 0 for v in kept.values())
