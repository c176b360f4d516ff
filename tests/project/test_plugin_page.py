"""docs/plugins.md's complete plugin file and space are what they say: `plan` accepts them and the network
is what the page describes (its stitch points, logits per class, an identity stitch at each point); each
mistake the page shows is refused with the message it shows."""

import re

import pytest
import torch

from sweep.cli import main
from sweep.models.base import build, split
from tests.conftest import REPO

PAGE = (REPO / "docs" / "plugins.md").read_text()


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", PAGE, re.S)


@pytest.fixture
def study(tmp_path):
    (tmp_path / "my_models.py").write_text(blocks("python")[0])
    (tmp_path / "space.yaml").write_text(blocks("yaml")[0])
    yield tmp_path
    from sweep.registry import ARCHITECTURES, PLUGIN_VERSIONS

    if "tiny_cnn" in ARCHITECTURES._entries:
        ARCHITECTURES.remove("tiny_cnn")
    __import__("sys").modules.pop("my_models", None)
    PLUGIN_VERSIONS.pop("my_models", None)


def test_the_page_s_plugin_and_space_plan_and_build_the_network_it_describes(study, capsys):
    assert main(["plan", str(study / "space.yaml")]) == 0, capsys.readouterr().err
    assert "zoo:a -> zoo:b dm: 4 trials" in capsys.readouterr().out  # stitch_points: all = block1 .. block4
    model = build("tiny_cnn", 1, 10, (0.5,), (0.5,), image_size=28).eval()
    assert model.stitch_points == ["block1", "block2", "block3", "block4"]
    x = torch.rand(3, 1, 28, 28)
    with torch.no_grad():
        assert model(x).shape == (3, 10)
        for point in model.stitch_points:
            front, end = split(model, point)
            assert torch.allclose(end(front(x)), model(x), atol=1e-6)  # the same modules, in the same order


@pytest.mark.parametrize(
    "edit, shown",
    [
        (
            ("mean, std, image_size):", "std, image_size):"),
            "must take the keyword arguments in_channels,\n  num_classes",
        ),
        (('"block4"])', '"block5"])'), "stitch\n  points ['block5'] are not stages of this network"),
        (("nn.AdaptiveAvgPool2d(1), nn.Flatten()", "nn.Flatten()"), "its stage 'head'\n  fails on an input of shape"),
    ],
)
def test_each_mistake_the_page_shows_is_refused_as_shown(study, capsys, edit, shown):
    source = blocks("python")[0]
    assert edit[0] in source
    (study / "my_models.py").write_text(source.replace(*edit))
    assert main(["plan", str(study / "space.yaml")]) == 2
    err = capsys.readouterr().err
    assert " ".join(shown.split()) in " ".join(PAGE.split())  # the page shows it ...
    assert " ".join(shown.split()) in err, err  # ... and the command says it
    where = re.search(r"\(at (my_models\.py:\d+) in|builder tiny_cnn \((my_models\.py:\d+)\)", err)
    assert where is None or where.group(0) in " ".join(PAGE.split()), err  # the file and line the page gives
