"""Print (or, with --write, store) the golden identities of every shipped search space: a digest of its
sorted trial ids, representation-test unit ids, the unit ids of every other kind of work it has, and its
donor keys, with their counts.

`tests/project/test_golden_ids.py` compares the shipped spaces with `tests/golden_ids.json`, so a refactor that
changes an identity (and so makes every recorded result rerun) fails a test. When a change of identity is on
purpose, bump `sweep.store.schema.SCHEMA_VERSION` if rows change meaning, say so in docs/, and run
`.venv/bin/python tests/scripts/golden_ids.py --write`.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden_ids.json"


def identities(path: Path) -> dict:
    from sweep.config.space import load_space
    from sweep.registry import KINDS

    sweep = load_space(path)

    def digest(ids) -> dict:
        ids = sorted(ids)
        return {"count": len(ids), "sha256": hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]}

    found = {
        "trials": digest(t.trial_id for t in sweep.trials),
        "reptests": digest(u.unit_id for u in sweep.reptests),
        "donors": {name: d.donor_key for name, d in sorted(sweep.donors.items())},
    }
    for name, kind in KINDS.items():  # the other kinds, where a space has units of them
        if kind.section and name not in ("trial", "reptest") and sweep.units.get(name):
            found[name] = digest(kind.unit_id(u) for u in sweep.units[name])
    return found


def all_identities() -> dict:
    return {p.name: identities(p) for p in sorted((REPO / "search_spaces").glob("*.yaml"))}


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    found = all_identities()
    text = json.dumps(found, indent=1, sort_keys=True) + "\n"
    if "--write" in sys.argv:
        GOLDEN.write_text(text)
        print(f"wrote {GOLDEN}")
    else:
        print(text)
