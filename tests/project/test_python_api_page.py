"""docs/python-api.md's example runs as the page shows it: a space given as a mapping, planned, run through Ray,
loaded and reported from Python."""

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

PAGE = REPO / "docs" / "python-api.md"


def _example() -> str:
    (code,) = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    return code


def test_the_page_shows_one_example_using_the_documented_names():
    code = _example()
    assert "sweep.plan(" in code and "sweep.run(" in code and "results.report(" in code
    for name in ("plan", "run", "resume", "status", "report"):
        assert f"`sweep.{name}(" in PAGE.read_text()


@pytest.mark.slow
def test_the_page_s_example_runs(tmp_path):
    code = f"RESULTS_ROOT = {str(tmp_path / 'results')!r}\nREPORT_DIR = {str(tmp_path / 'report')!r}\n" + _example()
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert "sweep api_demo: 1 donors, 1 trials" in out.stdout
    assert (tmp_path / "report" / "index.html").is_file()
    assert (tmp_path / "results" / "api_demo" / "space.yaml").is_file()
