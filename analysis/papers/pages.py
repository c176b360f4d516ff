"""The docs' page of each paper ("how to reproduce Jones et al. 2022"), rendered from the registry and from what
`tests/scripts/paper_pages.py` measured (each space's expected compute from `plan --estimate`, and our values of
the paper's numbers in a reduced run, where one was given to it). Text only: no pandas."""

from __future__ import annotations

import re

from analysis.papers import Item, Number, items, paper

DEPARTURES = "../design.md#departures-from-the-papers"


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _value(v: float | None, unit: str) -> str:
    if v is None:
        return "not run"
    return f"{v:.3g}{unit}" if abs(v) < 1 else f"{v:.1f}{unit}" if unit == "%" else f"{v:.4g}{unit}"


def _ours(v: float | None, n: Number) -> str:
    """Our value of number `n`, rounded to the decimals the paper printed for it (where it printed digits)."""
    if v is None or n.decimals is None:
        return _value(v, n.unit)
    return f"{v:.{n.decimals}f}{n.unit}"


def _number_row(n: Number, v: float | None) -> str:
    """A row of the numbers' table: the paper's number as printed, ours beside it; where the paper prints
    another value for the same quantity, both are named and ours is compared with neither."""
    paper, mine = f"{n.printed}{n.unit}", _ours(v, n) if n.ours else "no counterpart in the report"
    if n.contradiction:
        paper += f" (the paper contradicts itself: {n.contradiction})"
        mine += " (not compared: the paper prints two values)" if n.ours else ""
    return f"| {_cell(n.row)} | {_cell(n.col)} | {_cell(paper)} | {_cell(mine)} |"


def _space_lines(it: Item, estimates: dict[str, str], reduced: list[str], slug: str) -> list[str]:
    lines = []
    for space in it.spaces:
        estimate = estimates.get(space, "not estimated")
        scale = "reduced" if space in reduced else "paper scale"
        lines.append(f"- {scale}: `stitchsweep run search_spaces/{space}` (expected compute: {estimate})")
    if it.spaces and it.sections:
        name = it.spaces[0].rsplit("/", 1)[-1].removesuffix(".yaml")
        sections = ", ".join(f"`{s}`" for s in it.sections)
        lines.append(f"- report: `stitchsweep report results/{name} --paper {slug}` (sections {sections})")
    return lines


def _item_section(it: Item, measured: dict, slug: str) -> list[str]:
    out = [f"### {it.item}", "", it.caption + ("" if it.caption.endswith(".") else "."), ""]
    if it.reading:
        out += [f"Our reading: {it.reading}", ""]
    out += [f"**The paper contradicts itself**: {c}{'' if c.endswith('.') else '.'}" for c in it.contradictions]
    out += [""] if it.contradictions else []
    if it.status != "runs":
        out += [f"**{it.status}**: {it.reason}", ""]
    out += _space_lines(it, measured.get("estimates", {}), measured.get("reduced", []), slug)
    if it.reduced_run:
        out.append(f"- reduced run: [{it.reduced_run}](../reproductions.md#{github_anchor(it.reduced_run)})")
    if it.status == "runs":
        out.append(f"- run at the paper's scale: {'yes' if it.paper_scale else 'not yet'}")
    if it.departures:
        out.append("- departures: " + "; ".join(f"[{d}]({DEPARTURES})" for d in it.departures))
    if it.layout:
        out.append(f"- layout: {it.layout}")
    if it.numbers:
        ours = measured.get("ours", {}).get(f"{slug} {it.item}", {})
        source = ours.get("source", "")
        header = "| row | quantity | the paper's | ours" + (f" ({source})" if source else "") + " |"
        out += ["", header, "|---|---|---|---|"]
        values = ours.get("values", [None] * len(it.numbers))
        out += [_number_row(n, v) for n, v in zip(it.numbers, values, strict=False)]
    return [*out, ""]


def render(slug: str, measured: dict) -> str:
    """The Markdown page of paper `slug`."""
    p = paper(slug)
    found = items(slug)
    head = [
        f"# Reproducing {p.short}",
        "",
        f"{p.citation}.",
        "",
        f"Generated from the paper-items registry (`analysis/papers/{slug}.json`) by"
        " `python tests/scripts/paper_pages.py --write`; edit the registry, not this page."
        f" `stitchsweep figures --paper {slug}` lists the same items, and `stitchsweep report RESULTS... --paper"
        f" {slug}` draws them in this order. Expected compute: `plan --estimate` with the"
        f" {measured.get('profile', 'default')} profile (device time on one worker).",
        "",
        "| item | status | what it shows | spaces | report sections |",
        "|---|---|---|---|---|",
    ]
    for it in found:
        spaces = ", ".join(f"`{s}`" for s in it.spaces) or "-"
        sections = ", ".join(f"`{s}`" for s in it.sections) or "-"
        link = f"[{it.item}](#{github_anchor(it.item)})"
        head.append(f"| {link} | {it.status} | {_cell(it.caption)} | {spaces} | {sections} |")
    body = [line for it in found for line in _item_section(it, measured, slug)]
    return "\n".join([*head, "", "## Items", "", *body]).rstrip() + "\n"
