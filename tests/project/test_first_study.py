"""The README's study, `search_spaces/a_first_study.yaml`: the README shows the shipped file, it plans to what
its comments say (a family, a zip generator, an include, CKA per trial and as a matrix), and it runs start to
end at a tiny size: its own copy, with a data block of the digits in place of the shipped include."""

import os
import re
import subprocess
import sys

import pytest
import yaml

import analysis
from sweep.config.space import load_space
from tests.conftest import REPO

STUDY = REPO / "search_spaces" / "a_first_study.yaml"
POINTS = ["layer1.0", "layer1.1", "layer2.0", "layer2.1", "layer3.0", "layer3.1"]


def test_the_readme_shows_the_shipped_study():
    """The README's block is the file below its opening comment (which says what the README's text says)."""
    body = "".join(line for line in STUDY.read_text().splitlines(True) if not line.startswith("#"))
    blocks = re.findall(r"```yaml\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)
    assert body in blocks
    assert "stitchsweep plan search_spaces/a_first_study.yaml" in (REPO / "README.md").read_text()


def test_the_study_plans_to_what_its_comments_say():
    sweep = load_space(STUDY)
    assert sorted(sweep.donors) == ["net_s0", "net_s1"]  # the family
    assert [d.seed for d in sweep.donors.values()] == [0, 1] and {d.arch for d in sweep.donors.values()} == {
        "resnet_tiny"
    }
    assert sweep.data.dataset == "fashion_mnist" and sweep.data.train_size == 12000  # the include
    assert {(t.front, t.end) for t in sweep.trials} == {("zoo:net_s0", "zoo:net_s1")}  # the zip generator
    assert len(sweep.trials) == 18
    per_point = {p: sorted((t.objective, t.seed) for t in sweep.trials if t.front_point == p) for p in POINTS}
    assert all(v == [("dm", 0), ("tlm", 0), ("tlm", 1)] for v in per_point.values()), per_point
    assert all(t.indices == ("cka",) for t in sweep.trials)
    (unit,) = sweep.units["similarity"]
    assert (unit.a, unit.b) == ("zoo:net_s0", "zoo:net_s1") and list(unit.a_points) == POINTS
    assert "include" not in sweep.raw and "vary" not in str(sweep.raw)  # what a run keeps is written out


def _tiny_copy(tmp_path):
    """The study as shipped, with its own data block of the digits and one epoch everywhere."""
    (tmp_path / "shared").mkdir()
    data = {"data": {"dataset": "digits", "train_size": None, "val_size": 200, "test_size": None}}
    (tmp_path / "shared" / "fashion_mnist_small.yaml").write_text(yaml.safe_dump(data))
    space = yaml.safe_load(STUDY.read_text())
    space["donors"]["net"]["donor"].update(epochs=1)
    space["stitching"].update(epochs=1, dm_samples=50, similarity_samples=200)
    # the matrix with the estimator that holds every activation, on the trials' images: its diagonal is then
    # the trials' CKA, from another code path
    space["similarity"][0].update(images=200, estimator="full")
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))
    return path


def _cli(*args) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "sweep", *map(str, args)], capture_output=True, text=True, timeout=900, env=os.environ
    )
    assert proc.returncode == 0, f"{args}: {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.mark.slow
@pytest.mark.ray
def test_the_study_runs_at_a_tiny_size(tmp_path):
    space = _tiny_copy(tmp_path)
    storage, report = tmp_path / "results", tmp_path / "report"
    _cli("run", space, "--storage", storage, "--num-cpus", 2)
    tables = analysis.load(storage / "first_study")
    trials, sim = tables["trials"], tables["similarity"]
    assert len(trials) == 18 and (trials["status"] == "done").all(), trials.get("error")
    assert trials["sim_cka"].between(0, 1 + 1e-9).all()
    # CKA is measured on the donors as trained: every trial at a point records the same value, and the
    # similarity unit's matrix (same images, all held) has it on its diagonal
    assert len(sim) == len(POINTS) ** 2
    for point, rows in trials.groupby("front_point"):
        diagonal = sim[(sim["a_point"] == point) & (sim["b_point"] == point)]["cka"]
        assert len(diagonal) == 1
        assert rows["sim_cka"].to_numpy() == pytest.approx(float(diagonal.iloc[0]), abs=1e-6), point
    _cli("report", storage / "first_study", "--out", report)
    assert (report / "index.html").stat().st_size > 10_000 and (report / "trials.csv").exists()


def test_the_study_with_its_include_written_out_is_valid_for_the_schema():
    """The schema checks a space file alone (`shared/` blocks are not spaces): the study written out, its
    included data block in it, is valid."""
    import jsonschema

    from sweep.config.schema import space_schema

    errors = list(jsonschema.Draft202012Validator(space_schema()).iter_errors(load_space(STUDY).raw))
    assert not errors, [e.message[:200] for e in errors]
