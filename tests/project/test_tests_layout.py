"""`tests/` mirrors the package tree: the tests of `sweep/planning/estimate.py` are
`tests/sweep/planning/test_estimate.py`.

A test file `tests/<package>/<folder>/test_X.py` names a module `<package>/<folder>/X.py` or a package
`<package>/<folder>/X/`, or is `test_X_<topic>.py` (a module's tests split by topic). End-to-end tests that
cross modules (quickstart, docs, layering, papers' layouts, browser, cluster) live in `tests/project/`."""

from pathlib import Path

from tests.conftest import REPO

MIRRORED = ("sweep", "analysis")
# folders of tests/ that hold test files, and those that hold helpers and scripts other code names by path
TEST_FOLDERS = {*MIRRORED, "project"}
OTHER_FOLDERS = {"benchmarks", "scripts", "__pycache__"}


def _subjects(folder: Path) -> set[str]:
    """The names a test file in the mirror of `folder` may be about: its modules and its subpackages."""
    modules = {p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", "__main__")}
    packages = {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}
    return modules | packages


def strays(repo: Path) -> list[str]:
    """Test files under `tests/<package>/` that name no module or package of `<package>/` at the same path."""
    found = []
    for package in MIRRORED:
        for test in sorted((repo / "tests" / package).rglob("test_*.py")):
            folder = repo / test.parent.relative_to(repo / "tests")
            name = test.stem.removeprefix("test_")
            subjects = _subjects(folder) if folder.is_dir() else set()
            if not any(name == s or name.startswith(s + "_") for s in subjects):
                found.append(str(test.relative_to(repo)))
    return found


def test_every_mirrored_test_file_names_a_module_or_package_at_its_path():
    assert strays(REPO) == [], "rename to test_<module>.py or test_<module>_<topic>.py under the module's folder"


def test_no_test_file_sits_at_the_top_of_tests_and_every_folder_is_known():
    tests = REPO / "tests"
    assert sorted(p.name for p in tests.glob("test_*.py")) == []
    folders = {p.name for p in tests.iterdir() if p.is_dir()}
    assert folders - TEST_FOLDERS - OTHER_FOLDERS == set()


def test_every_test_folder_is_a_package():
    # test files share basenames (kinds/test_similarity.py, measures/test_similarity.py): pytest tells them apart
    # by their package, and `from tests.sweep... import` needs one
    missing = [
        str(d.relative_to(REPO))
        for top in TEST_FOLDERS
        for d in [REPO / "tests" / top, *(REPO / "tests" / top).rglob("*")]
        if d.is_dir() and d.name != "__pycache__" and not (d / "__init__.py").is_file()
    ]
    assert missing == []


def test_the_rule_refuses_a_file_named_by_feature_and_a_misplaced_module(tmp_path):
    (tmp_path / "sweep" / "planning").mkdir(parents=True)
    for path in ("sweep/__init__.py", "sweep/planning/__init__.py", "sweep/planning/estimate.py", "sweep/registry.py"):
        (tmp_path / path).write_text("")
    for path in (
        "sweep/planning/test_estimate.py",
        "sweep/planning/test_estimate_prices.py",
        "sweep/test_planning.py",
        "sweep/test_registry_hints.py",
        "sweep/planning/test_faults.py",
        "sweep/test_estimate.py",
        "sweep/planning/test_estimates.py",
        "sweep/store/test_results.py",
    ):
        (tmp_path / "tests" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "tests" / path).write_text("")
    assert strays(tmp_path) == [
        "tests/sweep/planning/test_estimates.py",
        "tests/sweep/planning/test_faults.py",
        "tests/sweep/store/test_results.py",
        "tests/sweep/test_estimate.py",
    ]
