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


def test_the_page_s_kind_and_index_validate_plan_price_and_run_in_process(kind_plugin, capsys):
    """The page's kind of work and index, loaded as the space lists them: the files it shows are the layout it
    draws; `plan --estimate` prices the kind without importing its work or its report; a bad value is refused
    as the page shows; the index is 1 on identical sides; a unit run in-process writes the row the page says;
    the report module's section draws it."""
    import sys

    import numpy as np
    import pandas as pd

    from sweep.config.schema import space_schema
    from sweep.config.space import load_space
    from sweep.kinds.base import RunContext
    from sweep.registry import INDICES, KINDS, resolve
    from sweep.store.results import SweepDir

    folder = kind_plugin()
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    layout = re.search(r"```text\nmy_study/\n(.*?)```", PAGE, re.S).group(1)
    assert files == sorted(
        "echo/" + line.split()[0] if line.startswith("    ") else line.split()[0]
        for line in layout.splitlines()
        if not line.split()[0].endswith("/")
    )
    assert main(["plan", str(folder / "space.yaml"), "--estimate"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "sweep echo_study: 1 donors, 1 trials, 3 echo units" in out and "  3 echo units: " in out, out
    assert "not priced" not in out and "echo.run" not in sys.modules and "echo.report" not in sys.modules

    assert main(["plan", str(folder / "space.yaml"), "echo.count=0"]) == 2
    shown = "echo.count: expected an integer >= 1, found 0"
    assert shown in capsys.readouterr().err and shown in PAGE
    assert set(space_schema()["properties"]["echo"]["anyOf"][0]["properties"]) == {"count", "factor"}

    sweep = load_space(folder / "space.yaml")
    assert [p.form for p in sweep.plugins] == ["folder", "file"]
    units = sweep.units["echo"]
    assert [(u.number, u.factor, u.dataset) for u in units] == [(0, 2, "fashion_mnist"), (1, 2, "fashion_mnist"),
                                                                  (2, 2, "fashion_mnist")]  # fmt: skip
    assert sweep.trials[0].indices == ("cka", "norm_corr")
    a, b = torch.randn(50, 12), torch.randn(50, 7)
    norm_corr = INDICES["norm_corr"].fn
    assert norm_corr(a, a) == pytest.approx(1.0)  # identical sides, as the page says
    assert norm_corr(a, b) == pytest.approx(np.corrcoef(a.double().norm(dim=1), b.double().norm(dim=1))[0, 1])

    sweep_dir = SweepDir(folder / "results", sweep.name)
    sweep_dir.create()
    ctx = RunContext(sweep_dir, torch.device("cpu"))
    assert resolve(KINDS["echo"].run)(units[2], ctx)["status"] == "done"
    row = sweep_dir.part("echo", units[2].unit_id).read_parquet().to_pylist()[0]
    assert (row["number"], row["factor"], row["value"], row["status"]) == (2, 2, 4, "done")
    (section,) = resolve(KINDS["echo"].report)()
    rows = section.data(type("Data", (), {"table": lambda self, name: pd.DataFrame([row])})())
    assert section.png == "echo.png" and len(rows) == 1 and section.chart(rows).to_dict()["mark"]["type"] == "bar"
