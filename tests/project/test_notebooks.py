"""docs/notebooks.md runs: every Python example against a results directory the test makes (one donor and its
four trials), with RESULTS and OUT bound as the page says."""

import re

import pytest
import torch

from sweep.config.space import parse_space
from sweep.kinds.donor.run import run_donor
from sweep.kinds.trial.run import run_trial
from sweep.store.results import SweepDir
from tests.conftest import REPO

DOC = REPO / "docs" / "notebooks.md"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    import copy

    from tests.conftest import TINY_SPACE

    sweep = parse_space(copy.deepcopy(TINY_SPACE))
    sweep_dir = SweepDir(tmp_path_factory.mktemp("results"), sweep.name)
    sweep_dir.create()
    run_donor(sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, torch.device("cpu"))
    for t in sweep.trials:
        run_trial(t, sweep_dir, device=torch.device("cpu"))
    return sweep_dir.path


SNIPPETS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_page_has_examples():
    assert len(SNIPPETS) >= 4


@pytest.mark.slow
@pytest.mark.parametrize("k", range(len(SNIPPETS)))
def test_every_example_of_notebooks_md_runs(results, tmp_path, k, capsys):
    exec(compile(SNIPPETS[k], f"docs/notebooks.md[{k}]", "exec"), {"RESULTS": str(results), "OUT": tmp_path})
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_figure_and_table_names_are_the_reports_files_and_unknown_names_are_refused(results):
    import analysis

    data = analysis.report_data(results)
    assert "stitching" in analysis.figures() and "donors" in analysis.tables()
    assert analysis.figure("stitching", data).to_dict()["$schema"].startswith("https://vega.github.io/schema")
    with pytest.raises(ValueError, match="unknown report section 'stiching'"):
        analysis.figure("stiching", data)
    with pytest.raises(ValueError, match="no rows in this data"):
        analysis.figure("cka_matrices", data)
    assert len(data.where(objective="dm").trials) == 2 and len(data.where(objective=["dm", "tlm"]).trials) == 4


def _colour_encodings(spec):
    if isinstance(spec, dict):
        enc = spec.get("encoding", {})
        if isinstance(enc.get("color"), dict) and "field" in enc["color"]:
            yield enc["color"]
        for v in spec.values():
            yield from _colour_encodings(v)
    elif isinstance(spec, list):
        for v in spec:
            yield from _colour_encodings(v)


@pytest.mark.slow
def test_every_colour_legend_of_the_reports_figures_has_a_title(results):
    import analysis

    data = analysis.report_data(results)
    drawn = 0
    for name in analysis.figures():
        try:
            spec = analysis.figure(name, data).to_dict()
        except ValueError:  # nothing in this sweep for it
            continue
        drawn += 1
        for colour in _colour_encodings(spec):
            assert colour.get("title"), f"{name}: a colour legend without a title: {colour}"
    assert drawn >= 2
