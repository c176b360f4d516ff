"""Search-space validation and expansion, and trial identity."""

import dataclasses
import re
import subprocess
import sys

import pytest

from sweep.cli import main
from sweep.config.errors import SpecError
from sweep.config.space import load_space, parse_space
from tests.conftest import REPO


def test_expansion_counts_and_fields(tiny_space):
    sweep = parse_space(tiny_space)
    assert len(sweep.trials) == 2 * 2  # points x objectives
    dm = [t for t in sweep.trials if t.objective == "dm"]
    assert all(t.lr is None and t.epochs is None and t.dm_samples == 100 for t in dm)
    tlm = [t for t in sweep.trials if t.objective == "tlm"]
    assert all(t.lr == 0.01 and t.dm_samples is None and t.donor_bn == "frozen" for t in tlm)


def test_alpha_expands_only_for_objectives_that_use_it(tiny_space):
    tiny_space["stitching"]["objectives"] = ["tlm", "dm", "adv"]
    tiny_space["stitching"]["alphas"] = [0.0, 0.5, 1.0]
    sweep = parse_space(tiny_space)
    # 2 points x (tlm + dm + 3 alphas of adv): tlm and dm take no alpha, so their configs collapse
    assert len(sweep.trials) == 2 * 5
    assert {t.alpha for t in sweep.trials if t.objective != "adv"} == {None}


def test_trial_id_is_stable_and_scientific(tiny_space):
    a = parse_space(tiny_space).trials
    b = parse_space(tiny_space).trials
    assert [t.trial_id for t in a] == [t.trial_id for t in b]
    assert len({t.trial_id for t in a}) == len(a)
    # renaming the sweep or changing resources keeps ids; changing the tlm lr changes only tlm ids
    tiny_space["name"] = "other"
    tiny_space["resources"] = {"cpus_per_trial": 2}
    assert [t.trial_id for t in parse_space(tiny_space).trials] == [t.trial_id for t in a]
    tiny_space["stitching"]["lr"] = 0.5
    c = {t.trial_id for t in parse_space(tiny_space).trials}
    assert {t.trial_id for t in a if t.objective == "dm"} <= c
    assert not ({t.trial_id for t in a if t.objective == "tlm"} & c)


def test_donor_config_is_part_of_trial_identity(tiny_space):
    before = {t.trial_id for t in parse_space(tiny_space).trials}
    tiny_space["donors"]["plain_a"]["epochs"] = 3
    assert not before & {t.trial_id for t in parse_space(tiny_space).trials}


def test_trial_spec_is_frozen(tiny_space):
    t = parse_space(tiny_space).trials[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.seed = 3


def test_quickstart_space_is_valid():
    sweep = load_space(REPO / "search_spaces" / "quickstart.yaml")
    pairs = {(t.front, t.end) for t in sweep.trials}
    assert ("zoo:robust_a", "zoo:plain_a") in pairs and ("zoo:plain_a", "zoo:robust_a") in pairs
    assert ("zoo:plain_a", "zoo:plain_a") in pairs
    assert {t.objective for t in sweep.trials} == {"tlm", "dm"}


def _set(space, path, value):
    node = space
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    if value is KeyError:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value


BAD = [
    ("donors.plain_a.arch", "resnet_huge", "donors.plain_a.arch", "resnet_huge"),
    ("stitching.stitch_points", ["layer1.0", "layer7.0"], "stitching.stitch_points[1]", "layer7.0"),
    ("stitching.objectives", ["tlm", "magic"], "stitching.objectives[1]", "magic"),
    ("data.dataset", "imagenet21k", "data.dataset", "imagenet21k"),
    ("stitching.epochs", "ten", "stitching.epochs", "ten"),
    ("donors.plain_a.epochs", KeyError, "donors.plain_a.epochs", "required"),
    ("stitching.learning_rate", 0.1, "stitching.learning_rate", "unknown field"),
    ("stitching.pairs", [{"front": "zoo:nobody", "end": "zoo:plain_a"}], "stitching.pairs[0].front", "nobody"),
    ("name", "has space", "name", "has space"),
]


@pytest.mark.parametrize("path,value,field,found", BAD, ids=[b[0] for b in BAD])
def test_bad_space_names_field_expected_and_found(tiny_space, path, value, field, found):
    _set(tiny_space, path, value)
    with pytest.raises(SpecError) as err:
        parse_space(tiny_space)
    msg = str(err.value)
    assert msg.startswith(field + ":"), msg
    assert "expected" in msg and found in msg, msg


def test_cli_bad_space_exits_2_with_one_line_and_writes_nothing(tiny_space, write_space, tmp_path, capsys):
    tiny_space["stitching"]["objectives"] = ["adv"]
    del tiny_space["stitching"]["dm_samples"]
    tiny_space["stitching"]["alphas"] = [2]
    storage = tmp_path / "results"
    rc = main(["run", str(write_space(tiny_space)), "--storage", str(storage)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and "stitching.alphas[0]" in err and "found 2" in err
    assert not storage.exists()


def test_cli_not_a_results_dir_exits_2(tmp_path, capsys):
    for cmd in ("status", "resume", "report"):
        assert main([cmd, str(tmp_path / "nope")]) == 2
        assert "RESULTS: expected a results directory" in capsys.readouterr().err


def test_plan_prints_the_trial_count(tiny_space, write_space):
    out = subprocess.run(
        [sys.executable, "-m", "sweep", "plan", str(write_space(tiny_space))],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.splitlines()[0] == "sweep tiny: 1 donors, 4 trials"
    assert [line for line in out.splitlines()[2:] if not line.startswith("  memory:")] == [
        "  zoo:plain_a -> zoo:plain_a tlm: 2 trials",
        "  zoo:plain_a -> zoo:plain_a dm: 2 trials",
    ]


def test_misspelt_top_level_field_is_named_without_a_leading_dot(tiny_space):
    tiny_space["stiching"] = tiny_space.pop("stitching")
    with pytest.raises(SpecError) as err:
        parse_space(tiny_space)
    assert str(err.value).startswith("stiching: expected one of the fields")


def test_data_sizes_are_checked_against_the_dataset_before_anything_runs(tiny_space):
    tiny_space["data"]["train_size"] = 5000
    with pytest.raises(SpecError) as err:
        parse_space(tiny_space)
    assert str(err.value).startswith("data.train_size: expected train_size + val_size at most the 1438")


def test_robust_subset_cannot_exceed_the_test_set(tiny_space):
    tiny_space["evaluation"]["n_eval_robust"] = 100000
    with pytest.raises(SpecError) as err:
        parse_space(tiny_space)
    assert str(err.value).startswith("evaluation.n_eval_robust: expected an integer in [0, 359]")


def test_required_field_message_reads_naturally(tiny_space):
    del tiny_space["donors"]["plain_a"]["epochs"]
    with pytest.raises(SpecError) as err:
        parse_space(tiny_space)
    assert str(err.value) == ("donors.plain_a.epochs: expected an integer, found nothing (the field is required)")


def test_empty_and_broken_yaml_name_the_file(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(SpecError, match="empty.yaml: expected a mapping of search-space fields"):
        load_space(empty)
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nstitching:\n  objectives: [tlm, dm\n")
    with pytest.raises(SpecError) as err:
        load_space(broken)
    assert "broken.yaml: expected valid YAML" in str(err.value) and "line 4" in str(err.value)


def test_storage_root_given_for_results_suggests_the_sweeps(tmp_path, capsys):
    (tmp_path / "quickstart").mkdir()
    (tmp_path / "quickstart" / "space.yaml").write_text("name: quickstart\n")
    assert main(["status", str(tmp_path)]) == 2
    assert f"did you mean {tmp_path / 'quickstart'}?" in capsys.readouterr().err


@pytest.mark.parametrize("path", sorted((REPO / "search_spaces").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_search_space_passes_plan(path):
    """The paper-scale spaces need GPUs and downloads to run, but must validate here, offline (a donors-only
    space has donors and no other units)."""
    sweep = load_space(path)
    assert sweep.donors and (any(sweep.units.values()) or sweep.donor_evals)


def test_deterministic_objectives_run_once_whatever_the_seeds(tiny_space):
    tiny_space["stitching"]["seeds"] = [0, 1, 2]
    trials = parse_space(tiny_space).trials
    assert sum(t.objective == "tlm" for t in trials) == 2 * 3
    assert sum(t.objective == "dm" for t in trials) == 2


def test_sizes_that_depend_on_the_dataset_are_bounded(tiny_space):
    tiny_space["data"]["test_size"] = 5000
    with pytest.raises(SpecError, match=r"^data.test_size: expected an integer in \[1, 359\]"):
        parse_space(tiny_space)
    tiny_space["data"]["test_size"] = None
    tiny_space["stitching"]["dm_samples"] = 100000
    with pytest.raises(SpecError, match=r"^stitching.dm_samples: expected at most the 1238 training images"):
        parse_space(tiny_space)


def test_donor_identity_ignores_the_test_set_and_pgd_eps_may_be_null(tiny_space):
    key = parse_space(tiny_space).donors["plain_a"].donor_key
    tiny_space["data"]["test_size"] = 100
    assert parse_space(tiny_space).donors["plain_a"].donor_key == key
    tiny_space["donors"]["plain_a"].update(training="pgd", step_size=0.1, eps=None)
    assert parse_space(tiny_space).donors["plain_a"].eps == tiny_space["evaluation"]["eps"]


def test_donor_names_and_memory_format_are_not_identity(tiny_space):
    """Identity comes from the donor's key (what shapes its weights), not the name a space gives it, and
    channels_last (a memory format) does not change the maths."""
    before = [t.trial_id for t in parse_space(tiny_space).trials]
    renamed = dict(tiny_space, donors={"a_b": tiny_space["donors"]["plain_a"]})
    renamed["stitching"] = dict(
        tiny_space["stitching"], pairs=[{"front": "zoo:a_b", "end": "zoo:a_b"}], channels_last=True
    )
    after = parse_space(renamed).trials
    assert [t.trial_id for t in after] == before and after[0].front == "zoo:a_b" and after[0].channels_last


def test_two_names_for_one_donor_are_refused_naming_both(tiny_space):
    tiny_space["donors"]["copy"] = dict(tiny_space["donors"]["plain_a"])
    with pytest.raises(
        SpecError,
        match=r"^donors.copy: expected donors that differ in what shapes their"
        r" weights, found 'the same donor as donors.plain_a' \(use one name for it: plain_a or copy\)",
    ):
        parse_space(tiny_space)


def test_stitcher_optimiser_defaults_follow_seed_000_and_are_identity(tiny_space):
    sweep = parse_space(tiny_space)
    tlm = next(t for t in sweep.trials if t.objective == "tlm")
    dm = next(t for t in sweep.trials if t.objective == "dm")
    assert (tlm.optimizer, tlm.weight_decay, tlm.momentum, tlm.lr_schedule) == ("adam", 1e-4, None, "step")
    assert (dm.optimizer, dm.weight_decay, dm.momentum, dm.lr_schedule) == (None, None, None, None)
    tiny_space["stitching"].update(optimizer="sgd", weight_decay=1e-2, lr_schedule="constant")
    sgd = next(t for t in parse_space(tiny_space).trials if t.objective == "tlm")
    assert (sgd.optimizer, sgd.weight_decay, sgd.momentum, sgd.lr_schedule) == ("sgd", 1e-2, 0.9, "constant")
    assert sgd.trial_id != tlm.trial_id
    assert next(t for t in parse_space(tiny_space).trials if t.objective == "dm").trial_id == dm.trial_id
    tiny_space["stitching"].update(optimizer="adam", momentum=0.5)
    with pytest.raises(SpecError, match=r"^stitching.momentum: expected no momentum with optimizer: adam"):
        parse_space(tiny_space)


def test_pwcca_and_opd_layouts_resolve_like_the_reference_code(tiny_space):
    tiny_space["stitching"].update(
        indices=["pwcca", "opd", "cka"],
        end_points=["layer1.0", "layer3.1"],
        stitch_points=["layer1.0"],
        objectives=["dm"],
    )
    trials = {t.end_point: t for t in parse_space(tiny_space).trials}
    assert (trials["layer1.0"].pwcca_layout, trials["layer1.0"].opd_layout) == ("positions", "positions")
    assert (trials["layer3.1"].pwcca_layout, trials["layer3.1"].opd_layout) == ("pooled", "pooled")
    tiny_space["stitching"]["layouts"] = {"opd": "flatten"}
    trials = {t.end_point: t for t in parse_space(tiny_space).trials}
    assert trials["layer1.0"].opd_layout == "flatten" and trials["layer1.0"].pwcca_layout == "positions"
    tiny_space["stitching"]["indices"] = ["cka"]
    with pytest.raises(SpecError, match=r"^stitching.layouts.opd: expected a layout of an index the block lists"):
        parse_space(tiny_space)


def test_every_trial_spec_field_is_a_results_column():
    """A setting without a column would vanish from the results: config_row refuses it, and this lists the
    contract (the two donors-table lookups and the '+'-joined attacks are the only exceptions)."""
    from sweep.config.trial import TrialSpec
    from sweep.kinds.trial.run import NOT_COLUMNS
    from sweep.store.schema import trial_schema

    fields = {f.name for f in dataclasses.fields(TrialSpec)}
    assert NOT_COLUMNS <= fields and fields - NOT_COLUMNS <= set(trial_schema().names)
    assert "attack" in trial_schema().names


@pytest.mark.parametrize(
    "where,value,suggestion",
    [
        (("stitching", "objectives"), ["tlmm"], "did you mean 'tlm'?"),
        (("stitching", "indices"), ["ckaa"], "did you mean 'cka'?"),
        (("stitching", "stitcher"), "bn_affine", "did you mean 'bn_affine_bn'?"),
        (("donors", "plain_a", "arch"), "resnet_tinny", "did you mean 'resnet_tiny'?"),
        (("data", "dataset"), "fashion-mnist", "did you mean 'fashion_mnist'?"),
        (("stitching", "pairs"), [{"front": "zoo:plain_aa", "end": "zoo:plain_a"}], "did you mean 'plain_a'?"),
    ],
)
def test_unknown_names_get_a_did_you_mean_suggestion(tiny_space, where, value, suggestion):
    node = tiny_space
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    with pytest.raises(SpecError, match=re.escape(suggestion)):
        parse_space(tiny_space)


@pytest.mark.parametrize("flag", ["--num-cpus", "--max-concurrent"])
def test_counts_below_one_are_refused_naming_the_flag(tiny_space, write_space, tmp_path, capsys, flag):
    rc = main(["run", str(write_space(tiny_space)), "--storage", str(tmp_path / "r"), flag, "0"])
    assert rc == 2
    first = capsys.readouterr().err.splitlines()[0]
    assert first == f"stitchsweep: error: {flag}: expected a whole number >= 1, found 0"


def test_run_given_a_results_directory_suggests_resume(tmp_path, capsys):
    (tmp_path / "space.yaml").write_text("name: x\n")
    assert main(["run", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stitchsweep: error: SPACE: expected a search-space file") and f"resume {tmp_path}" in err


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == "stitchsweep 0.1.0"
