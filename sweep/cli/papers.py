"""The commands about the papers' items (the registry in `analysis.papers`): `stitchsweep figures` and
`stitchsweep report RESULTS... --paper P`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sweep.config.errors import SpecError


def _slug(name: str) -> str:
    from analysis.papers import paper

    try:
        return paper(name).slug
    except KeyError as exc:
        raise SpecError("--paper", "a paper's name", name, exc.args[0]) from None


def cmd_figures(args) -> int:
    """The papers' figures, tables and algorithms: status, spaces and report sections (`--json`: every field)."""
    from analysis.papers import items, paper

    found = items(_slug(args.paper) if args.paper else None)
    if args.json:
        print(json.dumps([i.as_json() for i in found], indent=2, ensure_ascii=False))
        return 0
    for it in found:
        where = ", ".join(it.spaces) if it.status == "runs" else it.reason
        scale = "paper scale" if it.paper_scale else ("reduced run" if it.reduced_run else "not run")
        line = f"{paper(it.paper).short:24} {it.item:10} {it.status:20} {where}"
        print(line + (f" [{', '.join(it.sections)}; {scale}]" if it.status == "runs" else ""))
    return 0


def paper_report(name: str, roots: list, out: str | None) -> tuple[Path, object]:
    """`report RESULTS... --paper P`: the folder of paper P's page and the function that writes it there from
    the (checked) results folders `roots` (the report command writes it as it writes a sweep's report)."""
    from analysis.report.paper import write_paper_report

    slug = _slug(name)
    return (Path(out) if out else Path("report") / slug), lambda folder: write_paper_report(slug, roots, folder)


def add_figures(sub) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "figures",
        help="list the papers' figures, tables and algorithms: status, spaces, report sections",
        epilog="example: stitchsweep figures --paper jones-2022 --json",
    )
    p.add_argument("--paper", default=None, help="one paper (e.g. jones-2022; default: all five)")
    p.add_argument("--json", action="store_true", help="print the items as a JSON list")
    p.set_defaults(fn=cmd_figures)
