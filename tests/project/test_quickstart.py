"""`make quickstart` as the README promises it: zoo, sweep and report on the real Fashion-MNIST quickstart."""

import re
import subprocess

import pytest

import analysis
from sweep.config.space import load_space
from tests.conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def test_make_quickstart_records_every_planned_trial_and_draws_the_plots(tmp_path):
    storage, report = tmp_path / "results", tmp_path / "report"
    proc = subprocess.run(
        ["make", "-C", str(REPO), "quickstart", f"STORAGE={storage}", f"REPORT={report}"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert re.search(r"^report: .*index\.html$", proc.stdout, re.M)

    sweep = load_space(REPO / "search_spaces" / "quickstart.yaml")
    plan = subprocess.run(
        [str(REPO / ".venv" / "bin" / "stitchsweep"), "plan", str(REPO / "search_spaces" / "quickstart.yaml")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    planned = int(re.match(r"sweep quickstart: .*?(\d+) trials", plan).group(1))
    assert planned == len(sweep.trials)
    parts = list((storage / "quickstart" / "trials").glob("*.parquet"))
    assert len(parts) == planned
    trials = analysis.load_trials(storage / "quickstart")
    assert (trials["status"] == "done").all(), trials["error"].dropna().tolist()
    # self-stitching by direct matching reproduces the end model exactly
    self_dm = trials[(trials["front"] == trials["end"]) & (trials["objective"] == "dm")]
    assert len(self_dm) == 6 and (self_dm["relative_acc"] == 1.0).all()

    page = (report / "index.html").read_text()
    for front, end in {(t.front, t.end) for t in sweep.trials}:  # a panel per pair, the objectives overlaid
        assert f"{front} -> {end}: accuracy by objective" in page, (front, end)
    for setting in ("tlm init=identity", "dm"):  # the overlaid settings (objective and its options)
        assert f'"setting": "{setting}"' in page or f'"setting":"{setting}"' in page, setting
    assert (report / "most_frequent_class.png").stat().st_size > 10_000
    assert (report / "stitching.png").stat().st_size > 10_000
