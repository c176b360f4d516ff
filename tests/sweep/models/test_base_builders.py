"""A plugin architecture that cannot be built or run on the space's images stops `plan` and `run` before
anything runs: one line naming the donor's field, the architecture, the plugin file and line, and what was
expected (the builder's keywords, the network's stages, the shapes at the failing stage); exit code 2; nothing
written."""

import copy

import pytest
import yaml

from sweep.cli import main
from tests.conftest import TINY_SPACE

PLUGIN = """
from torch import nn

from sweep.models.base import Normalize, StagedNet, register_architecture


def stages(in_channels, num_classes, mean, std, flat=16 * 14 * 14):
    return [
        ("norm", Normalize(mean, std)),
        ("stem", nn.Sequential(nn.Conv2d(in_channels, 8, 3, padding=1), nn.ReLU())),
        ("block1", nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU())),
        ("head", nn.Sequential(nn.Flatten(), nn.Linear(flat, num_classes))),
    ]


@register_architecture("{p}_good", "digits-sized CNN")
def good(*, in_channels, num_classes, mean, std, image_size):
    return StagedNet(stages(in_channels, num_classes, mean, std), ["stem", "block1"])


@register_architecture("{p}_no_mean", "its builder lacks a keyword the engine passes")
def no_mean(*, in_channels, num_classes, std, image_size):
    return StagedNet(stages(in_channels, num_classes, (0.5,), std), ["stem", "block1"])


@register_architecture("{p}_bad_point", "a stitch point that is not a stage")
def bad_point(*, in_channels, num_classes, mean, std, image_size):
    return StagedNet(stages(in_channels, num_classes, mean, std), ["stem", "block4"])


@register_architecture("{p}_bad_head", "a head whose input does not match the stage before")
def bad_head(*, in_channels, num_classes, mean, std, image_size):
    return StagedNet(stages(in_channels, num_classes, mean, std, flat=64), ["stem", "block1"])
"""


@pytest.fixture
def space(plugin_file, tmp_path):
    """A space of one donor (digits, 28x28 px) built by the plugin's architecture `{p}_<suffix>`."""
    path, module = plugin_file(PLUGIN.replace("{p}", "cnn"))
    lines = path.read_text().splitlines()

    def write(suffix: str):
        space = copy.deepcopy(TINY_SPACE)
        space["plugins"] = [path.name]
        space["donors"] = {"mine": {"arch": f"cnn_{suffix}", "training": "plain", "epochs": 1, "seed": 0}}
        space["stitching"] = dict(space["stitching"], pairs=[{"front": "zoo:mine", "end": "zoo:mine"}])
        space["stitching"]["stitch_points"] = ["stem"]
        (tmp_path / "space.yaml").write_text(yaml.safe_dump(space))
        line = next(i for i, text in enumerate(lines) if text.startswith(f"def {suffix}("))  # its decorator's
        return tmp_path / "space.yaml", f"{module}.py", line

    return write


def refused(capsys, *args) -> str:
    assert main(list(args)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err  # one line, no traceback
    return err


def test_a_plugin_network_that_builds_and_classifies_the_images_is_accepted(space, capsys):
    path, _, _ = space("good")
    assert main(["plan", str(path)]) == 0, capsys.readouterr().err


def test_a_builder_without_a_keyword_the_engine_passes_is_one_line_naming_its_keywords(space, capsys):
    path, file, line = space("no_mean")
    err = refused(capsys, "plan", str(path))
    expected = "error: donors.mine.arch: expected an architecture that builds and classifies the 1x28x28 images"
    assert expected in err and "of digits, found 'cnn_no_mean'" in err and f"builder no_mean ({file}:{line})" in err
    assert "in_channels, num_classes, mean, std, image_size" in err and "'mean'" in err


def test_a_stitch_point_that_is_not_a_stage_is_one_line_naming_the_stages(space, capsys):
    path, file, _ = space("bad_point")
    err = refused(capsys, "plan", str(path))
    assert "donors.mine.arch" in err and "['block4'] are not stages" in err
    assert "'norm', 'stem', 'block1', 'head'" in err  # the network's stages
    assert f"(at {file}:" in err and "in bad_point)" in err  # the builder's line that made the network


def test_a_head_that_does_not_fit_is_one_line_naming_the_stage_and_the_shapes(space, capsys, tmp_path):
    path, file, _ = space("bad_head")
    err = refused(capsys, "run", str(path), "--storage", str(tmp_path / "results"))
    assert "donors.mine.arch" in err and "its stage 'head' fails on an input of shape (2, 16, 14, 14)" in err
    assert "stem (2, 8, 28, 28), block1 (2, 16, 14, 14)" in err  # the shapes the stages before gave
    assert "mat1 and mat2 shapes cannot be multiplied" in err
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("*.parquet"))
