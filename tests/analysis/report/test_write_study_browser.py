"""The report of a study that is not a paper's (`test_write_study.STUDY`: plain donors, TLM and DM, CKA per point and a
CKA matrix, one robustness level) in headless Chromium (Debian's `chromium` and `chromium-driver`, as
`tests/test_browser.py`): the per-point index is drawn beside the accuracy, no robustness-level section is on the
page, no robust accuracy in a legend or a table, and the matrix's legend says its scale is the data's."""

from __future__ import annotations

import shutil
import time

import pytest

from tests.analysis.report.test_write_study import study_results
from tests.project.test_browser import browser  # noqa: F401  (the suite's headless Chromium, offline: a fixture)

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="no Chromium here: Debian's chromium and chromium-driver"),
]


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    from analysis.report.write import write_report

    root = tmp_path_factory.mktemp("study")
    return write_report(study_results(root / "own_study"), root / "report")


def _texts(driver, timeout: float = 60.0) -> list[str]:
    """Every text of the page's chart SVG, once drawn."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        texts = driver.execute_script(
            "return Array.from(document.querySelectorAll('#vis svg text')).map(t => t.textContent)"
        )
        if texts:
            return texts
        time.sleep(0.2)
    raise AssertionError("no chart SVG was drawn")


def test_the_study_report_draws_what_the_study_measured_and_nothing_it_did_not(page, browser):  # noqa: F811
    browser.get(page.as_uri())
    texts = _texts(browser)
    titles = [t for t in texts if "accuracy by objective" in t]
    assert titles == ["zoo:net_s0 -> zoo:net_s1: accuracy by objective"], titles
    index_titles = [t for t in texts if t.startswith("zoo:net_s0 -> zoo:net_s1: cka: rho")]
    assert len(index_titles) == 1 and "(tlm)" in index_titles[0] and "(dm)" in index_titles[0], texts
    assert {"tlm", "dm"} <= set(texts)  # the objectives in one legend
    assert not [t for t in texts if "robustness level" in t]
    assert "robust accuracy" not in texts
    assert [t for t in texts if t.startswith("CKA (scale: this data's")]
    body = browser.find_element("css selector", "body").text
    assert "Agreement with the head by robustness level" not in body
    assert "Stitched accuracy against each index at the same stitch point" in body
    donors = [t for t in browser.find_elements("css selector", "table.dataframe") if "n_eval_robust" in t.text][0]
    headers = [th.text for th in donors.find_elements("css selector", "thead th")]
    assert "eps" not in headers and "robust_acc" not in headers, headers
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
