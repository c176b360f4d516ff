"""A unit's whole worker need (`sweep.planning.worker_memory`): its donors from `networks.json` against the
built networks, its images, its indices, the runtime, and `plan`'s line of how many this machine holds."""

import pytest

from sweep.config.space import load_space
from sweep.costs.memory import GiB
from sweep.planning import worker_memory as wm
from sweep.registry import DATASETS

SPACE = "search_spaces/tlm_vs_dm_fmnist.yaml"


@pytest.mark.parametrize("arch", ["resnet_tiny", "wrn28_1"])
def test_the_networks_numbers_are_those_of_the_built_networks(arch):
    """`networks.json` against a network built here (`tests/scripts/network_numbers.py --write` rewrites it)."""
    from tests.scripts.network_numbers import numbers

    row = wm._numbers()[arch]
    for key in sorted(row)[:2]:
        assert row[key] == numbers(arch, key), f"{arch} {key}: run tests/scripts/network_numbers.py --write"


def test_every_builtin_architecture_is_sized():
    from sweep.models.declared import BUILTIN

    assert sorted(BUILTIN) == sorted(wm._numbers())


@pytest.mark.parametrize("cache", ["on", "off"])
def test_a_trial_unit_holds_its_donors_its_images_its_halves_its_indices_and_the_runtime(monkeypatch, cache):
    monkeypatch.setenv("STITCHSWEEP_CACHE", cache)
    sweep = load_space(SPACE)
    need = wm.unit_needs(sweep)["trial"]
    fmnist = DATASETS["fashion_mnist"]
    pool = (fmnist.train_pool + fmnist.test) * 1 * 28 * 28  # its files' 8-bit pixels, kept as they are
    splits = (3000 + 1000) * 1 * 28 * 28 + 2000 * 4 * 28 * 28  # training and validation 8-bit, test as floats
    ood = {"digits"}  # the space's OOD outliers ("noise" is drawn, not loaded), read whole (no reader of parts)
    pools = sum((DATASETS[d].train_pool + DATASETS[d].test) * wm.image_bytes(d) for d in ood)
    # with the cache on, Fashion-MNIST's split is read alone (`read_split`); off, `load_pool` keeps the dataset
    assert need.images == pools + splits + (pool if cache == "off" else 0)
    own = {word for word in need.label.split() if word.startswith("zoo:")}  # a donor at both ends: held once
    # with the cache on, a worker that runs the stage's other trials keeps their donors too (each once)
    read = {ref for t in sweep.trials for ref in (t.front, t.end)} if cache == "on" else own
    assert need.donors == len(read) * 4 * wm._numbers()["resnet_tiny"]["1x28x10"]
    assert need.indices > 0 and need.runtime == wm.RUNTIME and need.working > 0
    assert (need.halves > 0) == (cache == "on") == (f"halves {need.halves / GiB:.2f}" in need.parts())
    assert need.bytes == need.donors + need.images + need.halves + max(need.indices, need.working) + need.runtime


def test_a_worker_keeps_each_half_of_the_stages_units_once_within_the_budget(monkeypatch):
    """The stage's trials read each front's half on the same parts: the worker keeps each part once, and all of
    them at most the budget (`stage_kept`)."""
    from sweep.kinds.trial.cost import held
    from sweep.registry import KINDS
    from sweep.worker.cache import memory_budget

    sweep = load_space(SPACE)
    parts: dict = {}
    for t in sweep.trials:
        for k, v in held(t, sweep).items():
            parts[k] = max(v, parts.get(k, 0))
    assert len(parts) < sum(len(held(t, sweep)) for t in sweep.trials)  # shared between trials
    donors = len({ref for t in sweep.trials for ref in (t.front, t.end)}) * 4 * wm._numbers()["resnet_tiny"]["1x28x10"]
    need = wm.unit_needs(sweep)["trial"]
    assert need.halves == min(memory_budget() - donors, sum(v for v in parts.values() if v <= memory_budget()))
    monkeypatch.setenv("STITCHSWEEP_CACHE_MB", str(max(parts.values()) // 2**20 + 1))  # room for one part
    assert wm.unit_needs(sweep)["trial"].halves < need.halves
    assert wm.stage_kept(KINDS["trial"], sweep.trials, sweep)[1] == parts
    assert "similarity_samples = 500" in need.batch


def test_a_zoo_stage_unit_trains_its_donor():
    sweep = load_space(SPACE)
    need = wm.unit_needs(sweep)["donor"]
    one = 4 * wm._numbers()["resnet_tiny"]["1x28x10"]
    # its own donor trained; the stage's other donors, trained before by the same worker, kept in its cache
    assert need.donors == wm.TRAINING * one + (len(sweep.donors) - 1) * one
    assert need.working > 0 and "working" in need.parts()
    assert any(b.startswith("donors.") and b.endswith("batch_size = 128") for b in need.batch)


def test_plan_says_what_a_unit_needs_and_how_many_this_machine_holds_also_without_memory_per_trial():
    sweep = load_space(SPACE)
    assert not sweep.memory_per_trial
    lines = wm.plan_lines(sweep, machine=16 * GiB)
    trial = next(line for line in lines if line.startswith("memory: a trial unit needs about"))
    need = wm.unit_needs(sweep)["trial"]
    assert f"this machine (16.0 GiB) holds {int(0.7 * 16 * GiB // need.bytes)} at once" in trial
    assert "runtime 0.73" in trial and "(donors 0.00, images" in trial
    assert lines[-1].startswith("memory: on a cluster (`run --address`)")
    small = wm.plan_lines(sweep, machine=GiB)
    assert any("holds 0 at once: it fits on no node" in line for line in small)


def test_plan_on_a_cluster_counts_the_units_each_node_holds():
    """`plan --address`: the nodes' memory for tasks as Ray reports it, each node's whole units and their sum."""
    sweep = load_space(SPACE)
    need = wm.unit_needs(sweep)["trial"]
    nodes = [{"name": "10.0.0.1", "memory": 3.5 * need.bytes}, {"name": "10.0.0.2", "memory": 0.5 * need.bytes}]
    trial = next(line for line in wm.plan_lines(sweep, nodes=nodes) if "a trial unit" in line)
    big, small = nodes[0]["memory"] / GiB, nodes[1]["memory"] / GiB
    assert trial.endswith(
        f"the cluster holds 3 at once: 10.0.0.1 ({big:.1f} GiB for tasks) 3, 10.0.0.2 ({small:.1f} GiB for tasks) 0"
    )
    assert not any("on a cluster (`run --address`)" in line for line in wm.plan_lines(sweep, nodes=nodes))
    tiny = [{"name": "10.0.0.3", "memory": 0.5 * need.bytes}]
    assert any(line.endswith("; it fits on no node") for line in wm.plan_lines(sweep, nodes=tiny))


def test_plan_refuses_an_address_where_no_cluster_answers_in_one_line(tmp_path):
    import socket
    import subprocess
    import sys

    from tests.conftest import REPO

    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = subprocess.run(
        [sys.executable, "-m", "sweep", "plan", str(SPACE), "--address", f"127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("stitchsweep: error: --address: expected the host:port of a running Ray cluster's head")


def test_holds_is_the_whole_units_a_node_holds():
    assert wm.holds(10 * GiB, 3 * GiB) == 3
    assert wm.holds(2 * GiB, 3 * GiB) == 0
    assert wm.holds(9 * GiB, 3 * GiB) == 3


def test_this_machines_memory_is_read():
    assert wm.machine_memory() > GiB
