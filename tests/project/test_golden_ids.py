"""Trial identity is pinned: every shipped search space expands to the ids recorded in golden_ids.json.

A change here means every recorded result of that space would rerun. If it is on purpose, see
tests/scripts/golden_ids.py for how to record the new ids (and say so in the docs)."""

import json

import pytest

from tests.conftest import REPO
from tests.scripts.golden_ids import GOLDEN, identities

GOLDEN_IDS = json.loads(GOLDEN.read_text())


def test_every_shipped_space_has_golden_ids():
    assert set(GOLDEN_IDS) == {p.name for p in (REPO / "search_spaces").glob("*.yaml")}


@pytest.mark.parametrize("name", sorted(GOLDEN_IDS))
def test_identities_of_shipped_spaces_are_unchanged(name):
    found = identities(REPO / "search_spaces" / name)
    want = GOLDEN_IDS[name]
    assert found["donors"] == want["donors"], "donor keys changed: every cached donor would retrain"
    assert found["trials"] == want["trials"], "trial ids changed: every recorded trial would rerun"
    assert found["reptests"] == want["reptests"], "representation-test unit ids changed"
    assert found == want, "the unit ids of another kind of work changed"
