"""The shipped spaces by name: what names them, what an unknown name says, and the copies `init` makes."""

import pytest

from sweep.config import shipped
from sweep.config.errors import SpecError
from sweep.config.space import load_space
from tests.conftest import REPO

SPACES = REPO / "search_spaces"


def test_a_checkout_ships_its_search_spaces_folder_and_every_space_in_it_is_named():
    assert shipped.folder() == SPACES
    names = shipped.names()
    assert names[:2] == ["quickstart", "a_first_study"]
    on_disk = {p.relative_to(SPACES).with_suffix("").as_posix() for p in SPACES.rglob("*.yaml")}
    assert set(names) == {n for n in on_disk if not n.startswith("shared/")}
    assert "own_checkpoints/ding_tests_imagenet" in names


@pytest.mark.parametrize(
    "name",
    ["quickstart", "quickstart.yaml", "search_spaces/quickstart.yaml"],
)
def test_a_name_with_or_without_yaml_finds_the_file(name):
    assert shipped.find(name) == SPACES / "quickstart.yaml"


def test_a_space_in_a_subfolder_is_also_found_by_its_files_name():
    want = SPACES / "own_checkpoints" / "ding_tests_imagenet.yaml"
    assert shipped.find("ding_tests_imagenet") == shipped.find("own_checkpoints/ding_tests_imagenet") == want


def test_an_included_block_or_a_path_elsewhere_is_no_shipped_space():
    assert shipped.find("shared/fashion_mnist_small") is None
    assert shipped.find("fashion_mnist_small") is None
    assert shipped.find("elsewhere/quickstart.yaml") is None  # a missing file is not replaced by a shipped one


def test_an_existing_path_is_read_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "quickstart.yaml").write_text("name: mine\n")
    assert shipped.resolve("quickstart.yaml") == "quickstart.yaml"  # the file here, not the shipped one
    assert shipped.resolve("quickstart") == str(SPACES / "quickstart.yaml")


def test_an_unknown_name_says_the_closest_shipped_names_on_one_line():
    with pytest.raises(SpecError) as err:
        shipped.resolve("quickstrat")
    msg = str(err.value)
    assert msg.startswith("SPACE: expected a search-space YAML file or the name of a shipped space, found 'quickstrat'")
    assert "did you mean quickstart?" in msg and "stitchsweep init --list" in msg and "\n" not in msg
    with pytest.raises(SpecError, match="did you mean own_checkpoints/ding_tests_imagenet"):
        shipped.resolve("ding_tests_imagnet")
    with pytest.raises(SpecError) as err:
        shipped.resolve("zzzz")
    assert "did you mean" not in str(err.value) and "shipped: quickstart, a_first_study" in str(err.value)


def test_init_copies_a_space_with_its_includes_and_the_copy_plans_as_the_shipped_one(tmp_path):
    done = shipped.copy_space("a_first_study", tmp_path / "mine")
    assert done == [(tmp_path / "mine" / "a_first_study.yaml", True),
                    (tmp_path / "mine" / "shared" / "fashion_mnist_small.yaml", True)]  # fmt: skip
    assert done[1][0].read_bytes() == (SPACES / "shared" / "fashion_mnist_small.yaml").read_bytes()
    copy, original = load_space(done[0][0]), load_space(SPACES / "a_first_study.yaml")
    assert copy.raw == original.raw and [t.trial_id for t in copy.trials] == [t.trial_id for t in original.trials]


def test_init_keeps_a_file_with_the_same_text_and_never_overwrites_another(tmp_path):
    shipped.copy_space("a_first_study", tmp_path)
    assert [written for _, written in shipped.copy_space("a_first_study", tmp_path)] == [False, False]
    (tmp_path / "shared" / "fashion_mnist_small.yaml").write_text("data: {dataset: digits}\n")
    (tmp_path / "a_first_study.yaml").unlink()
    with pytest.raises(SpecError, match=r"DEST: .*never overwrites.*shared/fashion_mnist_small.yaml"):
        shipped.copy_space("a_first_study", tmp_path)
    assert not (tmp_path / "a_first_study.yaml").exists()  # nothing written: the check comes first


def test_init_refuses_an_unknown_name_and_a_file_as_its_folder(tmp_path):
    with pytest.raises(SpecError, match="NAME: expected the name of a shipped space.*did you mean a_first_study"):
        shipped.copy_space("a_frist_study", tmp_path)
    (tmp_path / "file").write_text("")
    with pytest.raises(SpecError, match="DEST: expected a folder"):
        shipped.copy_space("quickstart", tmp_path / "file")


@pytest.mark.parametrize("name", shipped.names())
def test_every_shipped_space_copies_with_what_it_includes(name, tmp_path):
    done = shipped.copy_space(name, tmp_path)
    assert all(written and path.is_relative_to(tmp_path) for path, written in done)
    assert [p.name for p in shipped.includes(done[0][0])] == [p.name for p in shipped.includes(shipped.find(name))]
