"""The worker's cache (`sweep.worker.cache`, `sweep.worker.activations`): cached and uncached trials record the
same rows, the LRU keeps to its byte budget, the node's folder is shared and survives torn files, donors are copies."""

import copy
import dataclasses
import shutil
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

import analysis
from sweep.config.space import parse_space
from sweep.data.core import make_splits
from sweep.kinds.donor.run import run_donor
from sweep.kinds.trial import run as stitch
from sweep.kinds.trial.run import run_trial
from sweep.models.base import split
from sweep.models.resnet import resnet_tiny
from sweep.registry import KINDS
from sweep.store.results import SweepDir, load_torch, save_torch
from sweep.worker import cache
from sweep.worker.activations import Frozen, compute
from sweep.worker.zoo import load_donor
from tests.conftest import TINY_SPACE

# Columns that may differ between two runs of one trial: timings, where and when it ran.
VOLATILE = {"hostname", "device", "finished_at"}


@pytest.fixture
def settings(tmp_path):
    """`settings(**env)`: this process's cache reconfigured for one test (its folder under tmp_path), the
    environment's settings restored afterwards."""

    def set_(**env):
        return cache.configure({cache.DIR_ENV: str(tmp_path / "node"), **env})

    yield set_
    cache.configure()


def test_lru_keeps_to_its_budget_and_evicts_the_least_recently_used(settings):
    c = settings(STITCHSWEEP_CACHE_MB="1", STITCHSWEEP_CACHE_DIR="")
    quarter = lambda v: torch.full((2**16,), float(v))  # noqa: E731  256 KiB each
    calls = []
    for i in range(4):
        c.get(("t", i), lambda i=i: calls.append(i) or quarter(i))
    assert c.bytes == 2**20 and calls == [0, 1, 2, 3]
    c.get(("t", 0), lambda: calls.append("again") or quarter(0))  # a hit: 0 becomes the most recent
    c.get(("t", 4), lambda: quarter(4))  # evicts 1, the least recently used
    assert c.bytes <= 2**20 and c.stats.evicted == 1
    c.get(("t", 1), lambda: calls.append("1 again") or quarter(1))
    assert calls == [0, 1, 2, 3, "1 again"]
    big = c.get(("big",), lambda: torch.zeros(2**19))  # 2 MiB: computed, returned, not kept
    assert len(big) == 2**19 and c.stats.too_large == 1 and c.bytes <= 2**20


def test_disk_level_is_shared_between_processes_and_survives_a_torn_file(settings, tmp_path):
    first = settings()
    value = torch.randn(100, 8)
    assert torch.equal(first.get(("acts", 1), lambda: value, disk=True), value)
    # another worker of the node: a fresh process cache, same folder
    other = cache.WorkerCache(cache.Settings.from_env({cache.DIR_ENV: str(tmp_path / "node")}))
    got = other.get(("acts", 1), lambda: pytest.fail("recomputed what the node has"), disk=True)
    assert torch.equal(got, value) and other.stats.disk_hits == 1
    (file,) = (tmp_path / "node").glob("*.pt")
    file.write_bytes(file.read_bytes()[:50])  # a writer that died half way
    third = cache.WorkerCache(cache.Settings.from_env({cache.DIR_ENV: str(tmp_path / "node")}))
    assert torch.equal(third.get(("acts", 1), lambda: value * 2, disk=True), value * 2)
    assert third.stats.misses == 1


def test_disk_level_keeps_to_its_budget(settings, tmp_path):
    c = settings(STITCHSWEEP_CACHE_DISK_MB="1")
    for i in range(6):  # 256 KiB each: at most four fit
        c.get(("acts", i), lambda: torch.zeros(2**16), disk=True)
    files = list((tmp_path / "node").glob("*.pt"))
    assert 0 < len(files) <= 4 and sum(f.stat().st_size for f in files) <= 2**20


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [("STITCHSWEEP_CACHE", "maybe", "'on' or 'off'"), ("STITCHSWEEP_CACHE_MB", "-3", "megabytes")],
)
def test_bad_settings_name_the_variable(name, value, expected):
    with pytest.raises(ValueError, match=f"{name}: expected .*{expected}.*{value}"):
        cache.Settings.from_env({name: value})


def test_front_activations_do_not_depend_on_how_images_are_batched():
    """Why a trial that trains on the front's activations records the row the engine recorded when it
    recomputed the front per batch (CPU fp32): f<=i of an image is the same in a shuffled training batch as
    in the fixed chunks (batches of one image excepted, which the design does not rely on). Bit for bit on
    the CPUs measured; asserted to float rounding, which a convolution's kernel choice may move on another
    CPU, while an image in the wrong place or a front in training mode moves far more."""
    torch.manual_seed(0)
    model = resnet_tiny(in_channels=1, num_classes=10, mean=(0.5,), std=(0.5,), image_size=16).eval()
    x = torch.rand(300, 1, 16, 16)
    perm = torch.randperm(300)
    for point in model.stitch_points:
        front, _ = split(model, point)
        front.eval()
        whole = compute(front, x, torch.device("cpu"))
        with torch.no_grad():
            shuffled = torch.empty_like(whole)
            for i in range(0, 300, 64):
                shuffled[perm[i : i + 64]] = front(x[perm[i : i + 64]])
        torch.testing.assert_close(shuffled, whole, rtol=1e-5, atol=1e-6, msg=point)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    space = copy.deepcopy(TINY_SPACE)
    space["stitching"].update(
        stitch_points=["layer1.1", "layer3.0"],
        objectives=["tlm", "dm+tlm", "dm"],
        indices=["cka", "dm"],
        ood={"outliers": ["noise"], "train_size": 200, "epochs": 1, "oe_epochs": 1, "samples": 100},
    )
    space["stitching"]["epochs"] = 2
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path_factory.mktemp("results"), sweep.name)
    sweep_dir.create()
    row = run_donor(sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, torch.device("cpu"))
    assert row["status"] == "done", row.get("error")
    return sweep, sweep_dir


def test_chunk_files_are_written_while_the_next_chunk_is_computed(settings, tmp_path, monkeypatch):
    """`on_disk` returns as soon as its value is computed; the file follows from a background thread, and
    `flush()` waits for it (a writer held up never holds up the computing)."""
    c = settings(STITCHSWEEP_CACHE_DIR=str(tmp_path / "node"))
    release, written = threading.Event(), []
    write = cache._write_tensor

    def held_write(entry, value, budget):
        assert release.wait(30)
        write(entry, value, budget)
        written.append(entry[0])

    monkeypatch.setattr(cache, "_write_tensor", held_write)
    values = [torch.full((4,), float(i)) for i in range(3)]
    got = [c.on_disk(("chunk", i), lambda i=i: values[i]) for i in range(3)]  # returns with every write held
    assert all(torch.equal(a, b) for a, b in zip(got, values)) and written == []
    release.set()
    c.flush()
    assert len(written) == 3 and all(p.is_file() for p in written)
    other = cache.WorkerCache(cache.Settings.from_env({cache.DIR_ENV: str(tmp_path / "node")}))
    again = other.on_disk(("chunk", 1), lambda: pytest.fail("recomputed what the node has"))
    assert torch.equal(again, values[1])


def test_an_unwritable_node_folder_costs_only_the_sharing(settings, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    c = settings(STITCHSWEEP_CACHE_DIR=str(blocker / "cache"))
    value = torch.ones(10)
    assert torch.equal(c.get(("acts", "x"), lambda: value, disk=True), value)


def _rows(sweep, sweep_dir, trials):
    for spec in trials:
        row = run_trial(spec, sweep_dir, device=torch.device("cpu"))
        assert row["status"] == "done", row.get("error")
    rows = analysis.load_trials(sweep_dir.path).set_index("trial_id").sort_index()
    keep = [c for c in rows.columns if not c.startswith("time_") and c not in VOLATILE]
    return rows[keep]


@pytest.mark.slow
def test_cached_and_uncached_trials_record_the_same_rows(zoo, settings, tmp_path):
    """Every column but timings, host, device and time, bitwise (CPU fp32): TLM from random and DM init, DM,
    indices (CKA, DM distance), OOD AUROC; the second cached pass reads everything from the cache."""
    sweep, sweep_dir = zoo
    # sizes that leave one image alone: the last training batch (1025 = 8 x 128 + 1) and the last chunk of
    # the indices' 251 test images, where a convolution's output may differ in the last bit
    trials = [dataclasses.replace(t, n_eval_robust=8, train_size=1025, similarity_samples=251) for t in sweep.trials]
    assert {t.objective for t in trials} == {"tlm", "dm+tlm", "dm"}

    def copy_of_zoo(name):
        d = SweepDir(tmp_path / name, sweep.name)
        d.create()
        shutil.copytree(str(sweep_dir.root / "zoo"), str(d.root / "zoo"))
        shutil.copytree(str(sweep_dir.donors), str(d.donors), dirs_exist_ok=True)
        return d

    settings(STITCHSWEEP_CACHE="off")
    uncached = _rows(sweep, copy_of_zoo("off"), trials)
    c = settings()
    on = copy_of_zoo("on")
    cached = _rows(sweep, on, trials)
    assert c.stats.misses > 0
    for part in (on.path / "trials").glob("*.parquet"):
        part.unlink()
    misses = c.stats.misses
    again = _rows(sweep, on, trials)  # the worker's next trials: donors and activations from the cache
    assert c.stats.misses == misses and c.stats.hits > 0
    assert len(uncached) == len(trials)
    pd.testing.assert_frame_equal(cached, uncached, check_exact=True)
    pd.testing.assert_frame_equal(again, uncached, check_exact=True)


@pytest.mark.slow
def test_load_donor_hands_out_copies(zoo, settings):
    _, sweep_dir = zoo
    settings()
    key = next(iter(p.name for p in Path(str(sweep_dir.root / "zoo")).iterdir()))
    a = load_donor(sweep_dir, key, torch.device("cpu"))
    with torch.no_grad():
        next(a.parameters()).add_(1.0)
    b = load_donor(sweep_dir, key, torch.device("cpu"))
    assert not torch.equal(next(a.parameters()), next(b.parameters()))


def test_a_part_over_the_budget_is_computed_only_up_to_the_chunk_asked_for(settings):
    c = settings(STITCHSWEEP_CACHE_MB="0", STITCHSWEEP_CACHE_DIR="")
    splits = make_splits("digits", 100, 50, 300)
    seen = []
    net = lambda x: seen.append(len(x)) or x.flatten(1)  # noqa: E731
    got = Frozen(net, ("x", "p"), splits, torch.device("cpu")).on("test", 10)
    # a probe of 2 images sizes the part (300 x 784 floats > 0 MB), then the first chunk of 250 images
    assert got.shape == (10, 784) and seen[0] == 2 and sum(seen[1:]) == 250 and c.bytes == 0
    assert torch.equal(got, splits.test_x[:10].flatten(1))


def test_a_part_is_computed_chunk_by_chunk_as_far_as_units_ask(settings):
    """A DM fit on 100 images computes one chunk of 250, not the split; a later unit asking for 600 computes the
    two chunks it lacks; another worker (memory empty) reads the node's chunk files and computes nothing. What
    comes back is what computing the whole part on the chunk grid gives (the same chunks: exact)."""
    c = settings()
    splits = make_splits("digits", 1000, 50, 300)
    seen = []
    net = lambda x: seen.append(len(x)) or x.flatten(1) * 2  # noqa: E731
    frozen = Frozen(net, ("x", "p"), splits, torch.device("cpu"))
    assert frozen.on("train", 100).shape == (100, 784) and seen[0] == 2 and sum(seen) == 2 + 250
    got = frozen.on("train", 600)
    assert sum(seen) == 2 + 3 * 250  # images computed (on the CPU in passes of `CPU_BATCH`)
    whole = compute(lambda x: x.flatten(1) * 2, splits.train_x, torch.device("cpu"))
    assert torch.equal(got, whole[:600])
    assert torch.equal(frozen.on("train", 300), got[:300]) and sum(seen) == 2 + 3 * 250  # kept: nothing new
    c.clear()
    seen.clear()
    assert torch.equal(frozen.on("train", 600), got) and seen == [2]  # only the size probe: chunks from files
    assert c.stats.disk_hits == 3


def test_trials_sharing_a_front_are_ordered_together():
    sweep = parse_space(dict(copy.deepcopy(TINY_SPACE), stitching=dict(TINY_SPACE["stitching"], stitch_points="all")))
    kind = KINDS["trial"]
    units = list(kind.units(sweep).values())
    ordered = sorted(units, key=kind.locality)
    fronts = [(u.front_key, u.front_point) for u in ordered]
    changes = sum(a != b for a, b in zip(fronts, fronts[1:]))
    assert changes == len(set(fronts)) - 1  # each front's trials are one run


@pytest.mark.parametrize(
    ("flags", "env", "field"),
    [(["--cache-mb", "-1"], {}, "--cache-mb"), ([], {"STITCHSWEEP_CACHE": "maybe"}, "STITCHSWEEP_CACHE")],
)
def test_run_refuses_bad_cache_settings_before_ray_starts(
    flags, env, field, write_space, tiny_space, tmp_path, monkeypatch, capsys
):
    from sweep.cli import EXIT_BAD_INPUT, main

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    code = main(["run", str(write_space(tiny_space)), "--storage", str(tmp_path / "r"), *flags])
    assert code == EXIT_BAD_INPUT
    assert f"error: {field}: expected" in capsys.readouterr().err


@pytest.mark.slow
def test_training_on_the_fronts_activations_reproduces_training_on_images(zoo, settings, tmp_path):
    """A budget of 0 MB keeps nothing and sends every fit back to recomputing the front per batch (the engine
    before the cache); at sizes where no batch holds a single image, its rows equal those of the fits that
    train on the front's activations: bit for bit on the CPUs measured, asserted to a tolerance that float
    rounding of the convolutions (another CPU's kernels for another batch size) stays well inside. An accuracy
    would move by a whole image only where two logits tie to within that rounding, which the suite's digits
    donors do not come near (`tests/ties.py`: smallest top-two margin measured 3e-3)."""
    sweep, sweep_dir = zoo
    trials = [dataclasses.replace(t, n_eval_robust=8) for t in sweep.trials]
    rows = {}
    for budget in ("0", "2048"):
        settings(STITCHSWEEP_CACHE_MB=budget, STITCHSWEEP_CACHE_DIR="")
        d = SweepDir(tmp_path / f"mb{budget}", sweep.name)
        d.create()
        shutil.copytree(str(sweep_dir.root / "zoo"), str(d.root / "zoo"))
        shutil.copytree(str(sweep_dir.donors), str(d.donors), dirs_exist_ok=True)
        rows[budget] = _rows(sweep, d, trials)
    pd.testing.assert_frame_equal(rows["0"], rows["2048"], check_exact=False, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_donors_keep_their_test_predictions_and_trials_read_them_instead_of_computing(zoo, settings, tmp_path):
    """The donor stage keeps a donor's predicted classes on the trials' test images (stitching trials read the
    donor); a trial's agreement columns come from them, with the values a trial computing them records."""
    sweep, sweep_dir = zoo
    settings(STITCHSWEEP_CACHE="off")
    work = KINDS["donor"].units(sweep)["plain_a"]
    assert work.predictions  # the space's trials read plain_a
    trial = dataclasses.replace(next(t for t in sweep.trials if t.objective == "dm"), n_eval_robust=0)

    def fresh(name):
        d = SweepDir(tmp_path / name, sweep.name)
        d.create()
        shutil.copytree(str(sweep_dir.root / "zoo"), str(d.root / "zoo"))
        return d

    kept, computed = fresh("kept"), fresh("computed")
    run_donor(work.donor, work.evaluations, kept, torch.device("cpu"), predictions=True)
    run_donor(work.donor, work.evaluations, computed, torch.device("cpu"))
    model = load_donor(kept, trial.front_key, torch.device("cpu"))
    splits = make_splits(trial.dataset, trial.train_size, trial.val_size, trial.test_size)
    loc = stitch.predictions_loc(kept, trial.front_key, trial.dataset, len(splits.test_y))
    assert not stitch.predictions_loc(computed, trial.front_key, trial.dataset, len(splits.test_y)).exists()
    # the same logits, computed on the same chunk grid in this process: the same classes
    logits = Frozen(model, (*model.checkpoint_identity, "logits"), splits, torch.device("cpu")).on("test")
    assert torch.equal(load_torch(loc), logits.argmax(1))
    rows = _rows(sweep, kept, [trial])
    pd.testing.assert_frame_equal(rows, _rows(sweep, computed, [trial]), check_exact=True)
    # and the trial reads them: a kept file that says otherwise changes its agreement columns
    wrong = fresh("wrong")
    shutil.copytree(str(kept.donors), str(wrong.donors), dirs_exist_ok=True)
    save_torch(stitch.predictions_loc(wrong, trial.front_key, trial.dataset, len(splits.test_y)), logits.argmin(1))
    assert _rows(sweep, wrong, [trial])["head_agreement"].iloc[0] < rows["head_agreement"].iloc[0]


@pytest.mark.slow
def test_the_fronts_pass_over_the_test_images_counts_as_clean_evaluation(zoo, settings, tmp_path, monkeypatch):
    """The stitched network's clean evaluation starts with the front's activations of the test images (computed
    or read from the cache): their time is in `time_eval_clean_s`, not lost between the columns."""
    import sweep.worker.activations as activations

    sweep, sweep_dir = zoo
    settings()
    spec = next(t for t in sweep.trials if t.objective == "dm")
    slow = activations.Frozen.on

    def on(self, part, *args, **kwargs):
        if part == "test":
            time.sleep(1.05)  # at least a second on any clock
        return slow(self, part, *args, **kwargs)

    monkeypatch.setattr(activations.Frozen, "on", on)
    d = SweepDir(tmp_path / "timed", sweep.name)
    d.create()
    shutil.copytree(str(sweep_dir.root / "zoo"), str(d.root / "zoo"))
    row = run_trial(spec, d, device=torch.device("cpu"))
    assert row["status"] == "done", row.get("error")
    assert row["time_eval_clean_s"] >= 1.0
    parts = ("time_setup_s", "time_fit_s", "time_eval_clean_s", "time_eval_robust_s", "time_similarity_s")
    assert sum(row.get(c) or 0.0 for c in parts) <= row["time_total_s"]


def test_a_stage_writes_the_nodes_files_only_for_halves_two_of_its_units_read():
    """The stitching kind's `shares_halves`: a trial's front and end halves, (donor, point)."""
    kind = KINDS.get_entry("trial")

    def trials(points, objectives, pairs=None):
        space = copy.deepcopy(TINY_SPACE)
        space["stitching"].update(stitch_points=points, objectives=objectives)
        if pairs:
            space["donors"]["plain_b"] = dict(space["donors"]["plain_a"], seed=1)
            space["stitching"]["pairs"] = pairs
        return parse_space(space).trials

    assert not kind.shares_halves(trials(["layer1.0"], ["dm"]))  # one trial: its front and end are one half
    assert not kind.shares_halves(trials(["layer1.0", "layer3.1"], ["dm"]))  # no half read twice
    assert kind.shares_halves(trials(["layer1.0"], ["dm", "tlm"]))  # one front, two objectives
    a, b = "zoo:plain_a", "zoo:plain_b"
    assert kind.shares_halves(trials(["layer1.0"], ["dm"], [{"front": a, "end": b}, {"front": b, "end": a}]))


def test_a_cache_that_writes_no_node_files_still_reads_them(settings, tmp_path):
    c = settings()
    c.write_node = False
    value = torch.arange(4.0)
    assert torch.equal(c.on_disk(("chunk", 0), lambda: value), value)
    c.flush()
    assert not list((tmp_path / "node").glob("*.pt"))  # computed, not written
    c.write_node = True
    c.on_disk(("chunk", 1), lambda: value * 2)
    c.flush()
    c.write_node = False
    again = c.on_disk(("chunk", 1), lambda: pytest.fail("recomputed what the node has"))
    assert torch.equal(again, value * 2) and len(list((tmp_path / "node").glob("*.pt"))) == 1


def test_let_go_drops_the_entries_refused_and_keeps_the_node_s_files(settings):
    """A worker entering another stage lets go of what it kept in memory (the bytes counted down exactly); a
    tensor also written to the node's folder is read back from there, not computed again."""
    c = settings()
    c.keep(("donor", "a"), torch.zeros(1000))
    c.keep(("splits", "x"), torch.zeros(2000))
    made = []
    c.get(("activations", "p"), lambda: made.append(1) or torch.ones(3000), disk=True)
    c.flush()
    assert c.bytes == 4 * 6000
    assert c.let_go(lambda key: key[0] == "donor") == 4 * 5000
    assert c.bytes == 4 * 1000 and c.peek(("splits", "x")) is None and c.peek(("donor", "a")) is not None
    again = c.get(("activations", "p"), lambda: made.append(1) or torch.ones(3000), disk=True)
    assert made == [1] and torch.equal(again, torch.ones(3000)) and c.stats.disk_hits == 1


def test_a_worker_entering_another_stage_keeps_its_donors_and_the_halves_fed_to_trials(settings):
    from sweep.worker import release as backend

    c = settings()
    for key in (("donor", "a"), ("activations", "a", "p"), ("bytes-per-image", "a"), ("splits", "s")):
        c.keep(key, torch.zeros(10))
    backend.STAGE[:] = []
    backend.enter_stage("donor", KINDS["donor"], c)
    assert len(c._entries) == 4  # the first unit of a worker: nothing to let go
    backend.enter_stage("trial", KINDS["trial"], c)  # trials read the halves the donor stage fed
    assert {k[0] for k in c._entries} == {"donor", "activations", "bytes-per-image"}
    backend.enter_stage("trial", KINDS["trial"], c)
    backend.enter_stage("similarity", KINDS["similarity"], c)
    assert {k[0] for k in c._entries} == {"donor"}
    backend.STAGE[:] = []


@pytest.mark.parametrize("channels_last", [False, True])
def test_a_part_assembled_from_its_chunks_is_their_concatenation(channels_last):
    """`filled` copies a kept prefix and its chunks into one tensor as they come: the values, shape and layout of
    `torch.cat` of them (channels-last where they are), without holding the chunks and a concatenation."""
    from sweep.worker.activations import filled

    fmt = torch.channels_last if channels_last else torch.contiguous_format
    g = torch.Generator().manual_seed(0)
    pieces = [torch.randn(n, 4, 3, 5, generator=g).contiguous(memory_format=fmt) for n in (7, 5, 3)]
    whole = torch.cat(pieces)
    out = filled(iter(pieces), 15)
    assert torch.equal(out, whole) and out.stride() == whole.stride()
    assert filled(iter([whole]), 15) is whole  # a first piece of the whole part is the part
    with pytest.raises(ValueError, match="a part of 16 images assembled from pieces of 15"):
        filled(iter(pieces), 16)
