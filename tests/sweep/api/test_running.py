"""`sweep.run` / `resume` / `status`: what the command line's `run` and `resume` call. Bad options are refused
before anything is written or Ray starts; the command line's options map onto `RunOptions` one to one."""

import argparse
import copy

import pytest

import sweep
from sweep.api.running import RunOptions
from sweep.cli import build_parser
from sweep.config.errors import SpecError
from tests.conftest import TINY_SPACE


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_cpus": 0}, "--num-cpus: expected a whole number >= 1, found 0"),
        ({"max_concurrent": -1}, "--max-concurrent: expected a whole number >= 1"),
        ({"cache": "maybe"}, "--cache: expected on or off, found 'maybe'"),
        ({"tracker": "nope:x"}, "--tracker"),
    ],
)
def test_a_bad_option_is_refused_before_ray_starts(tmp_path, options, message):
    with pytest.raises(SpecError) as err:
        sweep.run(copy.deepcopy(TINY_SPACE), storage=tmp_path, **options)
    assert str(err.value).startswith(message)
    assert not (tmp_path / "tiny" / "trials").exists() or not any((tmp_path / "tiny" / "trials").iterdir())


def test_an_unknown_option_is_a_type_error_listing_the_options(tmp_path):
    with pytest.raises(TypeError, match=r"\['num_cpus'"):
        sweep.run(copy.deepcopy(TINY_SPACE), storage=tmp_path, cpus=2)


def test_the_command_line_options_are_the_run_options():
    args = build_parser().parse_args(["run", "s.yaml", "--num-cpus", "3", "--failed", "--only", "objective=dm"])
    opts = RunOptions.of(args)
    assert (opts.num_cpus, opts.failed, opts.only, opts.address) == (3, True, ["objective=dm"], None)
    assert RunOptions.of(argparse.Namespace()) == RunOptions()
    flags = {a.dest for a in build_parser()._subparsers._group_actions[0].choices["run"]._actions}
    assert set(RunOptions.__dataclass_fields__) <= flags  # every option is the command line's too


def test_status_and_resume_refuse_a_folder_that_is_not_a_sweep(tmp_path):
    for call in (sweep.status, sweep.resume):
        with pytest.raises(SpecError, match=r"^results: expected a results directory holding space.yaml"):
            call(tmp_path)


@pytest.mark.slow
@pytest.mark.ray
def test_a_run_uses_the_ray_its_caller_initialised_and_leaves_it_running(tmp_path):
    """A notebook that started Ray itself: the sweep runs on it, and it is still up afterwards."""
    import subprocess
    import sys

    import yaml

    from tests.conftest import REPO

    space = dict(copy.deepcopy(TINY_SPACE), evaluation=dict(TINY_SPACE["evaluation"], n_eval_robust=0))
    space["stitching"]["objectives"] = ["dm"]
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(space, sort_keys=False))
    code = (
        "import ray, sweep; ray.init(num_cpus=2, log_to_driver=False); "
        "r = sweep.run('tiny.yaml', storage='results'); "
        "print(r.complete, ray.is_initialized(), ray.cluster_resources().get('CPU'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-3:] == ["True", "True", "2.0"]
    assert "starting Ray" not in out.stdout
