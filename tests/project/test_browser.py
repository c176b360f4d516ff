"""The HTML report in a real browser: headless Chromium (Debian's `chromium` and `chromium-driver`, which
`make test` installs where it can) driven by Selenium opens a report the suite makes, offline. No console
error, no network request (everything is inlined), and every chart section drawn: an SVG with marks."""

import json
import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest
import torch

from sweep.config.space import parse_space
from sweep.kinds.donor.run import run_donor
from sweep.kinds.trial.run import run_trial
from sweep.store.results import SweepDir

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = [
    pytest.mark.slow,  # a real browser: seconds per page
    pytest.mark.skipif(
        not (CHROMIUM and DRIVER),
        reason="no Chromium here: install Debian's chromium and chromium-driver (make test does, as root)",
    ),
]


@pytest.fixture(scope="module")
def report(tmp_path_factory, tiny_space_module):
    from analysis.report.write import write_report

    sweep = parse_space(tiny_space_module)
    root = tmp_path_factory.mktemp("results")
    sweep_dir = SweepDir(root, sweep.name)
    sweep_dir.create()
    run_donor(sweep.donors["plain_a"], sweep.donor_evals["plain_a"], sweep_dir, torch.device("cpu"))
    for t in sweep.trials:
        run_trial(t, sweep_dir, device=torch.device("cpu"))
    return write_report(sweep_dir.path, root / "report")


@pytest.fixture(scope="module")
def tiny_space_module():
    import copy

    from tests.conftest import TINY_SPACE

    return copy.deepcopy(TINY_SPACE)


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="chromium-")
    # a closed network: without these, Chromium's own background connections fail, many at a time
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def _wait_for_svg(driver, timeout: float = 30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        svgs = driver.find_elements("css selector", "#vis svg")
        if svgs:
            return svgs[0]
        time.sleep(0.2)
    raise AssertionError("no chart SVG was drawn")


def test_the_report_renders_offline_with_every_chart_and_no_console_error(report, browser):
    browser.get_log("performance"), browser.get_log("browser")  # drop what the new-tab page logged
    browser.get(Path(report).as_uri())
    svg = _wait_for_svg(browser)
    # every chart section of the page is a titled sub-view of the SVG, with marks
    sections = browser.execute_script(
        "return Array.from(document.querySelectorAll('#vis svg g.mark-group.role-title text')).map(t => t.textContent)"
    )
    titles = [t for t in sections if t.startswith(("Stitching plots", "Class collapse"))]
    assert len(titles) == 2, sections
    marks = svg.find_elements("css selector", "g.mark-line path, g.mark-symbol path, g.mark-area path")
    assert len(marks) >= 10
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors
    requests = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requests.append(message["params"]["request"]["url"])
    assert any(u.startswith("file:") for u in requests)  # the log saw the page itself
    remote = [u for u in requests if u.split(":", 1)[0] in ("http", "https", "ws", "wss", "ftp")]
    assert not remote, remote
    assert browser.title == "stitchsweep: tiny"


def test_report_tables_sort_on_a_header_click_and_filter_as_one_types(report, browser):
    browser.get(Path(report).as_uri())
    _wait_for_svg(browser)
    trials = [t for t in browser.find_elements("css selector", "table.dataframe") if "trial_id" in t.text][0]

    def column(name):
        headers = [th.text for th in trials.find_elements("css selector", "thead th")]
        k = headers.index(name) + 1
        return [
            td.text for td in trials.find_elements("css selector", f"tbody tr td:nth-child({k})") if td.is_displayed()
        ]

    header = [th for th in trials.find_elements("css selector", "thead th") if th.text == "clean_acc"][0]
    header.click()
    ascending = [float(v) for v in column("clean_acc")]
    assert ascending == sorted(ascending) and len(ascending) == 4
    header.click()
    assert [float(v) for v in column("clean_acc")] == sorted(ascending, reverse=True)
    box = browser.execute_script("return arguments[0].previousElementSibling", trials)
    box.send_keys("layer3.1")
    points = column("front_point")
    assert points and set(points) == {"layer3.1"}
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


# each paper's page drawn from made-up results of its reduced spaces (tests/synthetic.py): the spaces this
# machine runs, so every chart of the page is one a user of the reduced runs sees
REDUCED = {
    "balogh-jelasity-2023": ("robust_stitching_fmnist.yaml", "inversion_fmnist.yaml"),
    "jones-2022": ("jones_fmnist.yaml",),
    "cianfarani-2022": ("cianfarani_fmnist.yaml", "cianfarani_threats_fmnist.yaml"),
    "smith-marcu-2024": ("smith_marcu_fmnist.yaml",),
    "balogh-jelasity-2025": ("tlm_vs_dm_fmnist.yaml",),
}


@pytest.mark.parametrize("slug", sorted(REDUCED))
def test_each_papers_page_shows_every_item_in_order_and_every_chart_image_loads(slug, tmp_path, browser):
    from analysis.papers import items, paper
    from analysis.report.paper import write_paper_report
    from tests.conftest import REPO
    from tests.synthetic import synthetic_results

    results = [synthetic_results(REPO / "search_spaces" / s, tmp_path / s.removesuffix(".yaml")) for s in REDUCED[slug]]
    index = write_paper_report(slug, results, tmp_path / "page")
    browser.get_log("browser")
    browser.get(index.as_uri())
    titles = [h.text for h in browser.find_elements("css selector", "h2")]
    assert titles == [f"{paper(slug).short} {it.item}" for it in items(slug)]
    loaded = browser.execute_script("return Array.from(document.images).map(i => i.complete && i.naturalWidth > 0)")
    assert loaded and all(loaded), loaded
    for block, it in zip(index.read_text().split("<h2 ")[1:], items(slug)):
        # every item is drawn (a chart or a table), links to the earlier item that drew the same, or says why it
        # does not run; none finds no rows in its paper's reduced results
        assert "<img" in block or "<table" in block or "Drawn above with" in block or it.status != "runs", it.item
        assert "No rows for this item" not in block, it.item
        for anchor in re.findall(r"href='#([^']+)'", block):  # the earlier item it links to is on the page
            assert f"<h2 id='{anchor}'>" in index.read_text(), (it.item, anchor)
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
