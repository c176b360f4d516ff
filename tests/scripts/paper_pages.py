"""Write docs/papers/<paper>.md from the paper-items registry (analysis/papers/*.json).

    PYTHONPATH=. .venv/bin/python tests/scripts/paper_pages.py --write
    PYTHONPATH=. .venv/bin/python tests/scripts/paper_pages.py --write --results jones-2022=results/jones_fmnist

It records in docs/papers/measured.json what the pages show besides the registry: every shipped space's expected
compute (`plan --estimate`, the default profile; about 10 s a space), which spaces are reduced ones (their
header says "at a reduced scale") and, for each paper given a results folder
(`--results PAPER=DIR`, e.g. its reduced run), our values of the paper's numbers there; a paper not given keeps
its earlier values. `--check` exits 1 when a page differs from what the registry and measured.json render
(tests/analysis/test_papers.py checks the same); `--pages` rewrites the pages from measured.json alone (after editing
the registry's text).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "papers"
MEASURED = DOCS / "measured.json"


def estimate(space: str) -> str:
    """'N h (d days) device time' of the whole space with the default profile."""
    from sweep.config.errors import SpecError
    from sweep.config.space import load_space
    from sweep.planning.estimate import plan_estimate
    from sweep.registry import KINDS

    try:
        sweep = load_space(str(REPO / "search_spaces" / space))
    except SpecError as exc:  # e.g. a space of checkpoints and data you bring, absent here
        return f"not estimated: the space does not check without its inputs ({exc.field})"
    units = {name: kind.units(sweep) for name, kind in KINDS.items()}
    lines = plan_estimate(sweep, units, None, None, None, None)
    total = next(line for line in lines if line.strip().startswith("total:"))
    return total.strip().removeprefix("total:").split(";")[0].strip()


def profile() -> str:
    from sweep.planning.estimate import load_profile

    return load_profile(None).get("name", "default")


def ours(slug: str, results: str) -> dict:
    from analysis.papers import items
    from analysis.report.data import report_data
    from analysis.report.paper import ours as our_value

    data = report_data(results)[0]
    return {
        f"{slug} {it.item}": {"source": data.name, "values": [our_value(n, data) for n in it.numbers]}
        for it in items(slug)
        if it.numbers
    }


def main() -> int:
    from analysis.papers import PAPERS
    from analysis.papers.pages import render

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="measure, then write measured.json and the pages")
    ap.add_argument("--check", action="store_true", help="exit 1 when a page is out of date")
    ap.add_argument("--pages", action="store_true", help="write the pages from measured.json as it is (no estimates)")
    ap.add_argument("--results", nargs="*", default=[], help="PAPER=DIR: our values of the paper's numbers")
    args = ap.parse_args()
    measured = json.loads(MEASURED.read_text()) if MEASURED.exists() else {}
    if args.write and not args.pages:
        spaces = sorted({str(p.relative_to(REPO / "search_spaces")) for p in (REPO / "search_spaces").rglob("*.yaml")})
        estimates = {}
        for space in spaces:
            estimates[space] = estimate(space)
            print(f"{space}: {estimates[space]}", flush=True)
        measured["estimates"], measured["profile"] = estimates, profile()
        # a space says in its header's first lines whether it runs "at a reduced scale" (on a 2-core CPU)
        heads = {s: " ".join((REPO / "search_spaces" / s).read_text().splitlines()[:3]) for s in spaces}
        measured["reduced"] = sorted(s for s, head in heads.items() if "at a reduced scale" in head)
    for pair in args.results:
        slug, results = pair.split("=", 1)
        measured.setdefault("ours", {}).update(ours(slug, results))
    if args.write or args.pages:
        DOCS.mkdir(parents=True, exist_ok=True)
        MEASURED.write_text(json.dumps(measured, indent=1, sort_keys=True) + "\n")
    stale = []
    for slug in PAPERS:
        page, text = DOCS / f"{slug}.md", render(slug, measured)
        if args.write or args.pages:
            page.write_text(text)
        elif not page.exists() or page.read_text() != text:
            stale.append(page.name)
    if stale:
        print(f"out of date: {', '.join(stale)}; run with --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
