"""`stitchsweep report RESULTS... --paper P`: one page with a paper's items in the paper's order, drawn from one
or more results folders (e.g. a CIFAR-10 and an ImageNet sweep that make the columns of one figure), each item
titled with the paper's item name, and the paper's own numbers beside ours."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import altair as alt
import pandas as pd

from analysis.papers import Item, Number, items, paper
from analysis.report.data import ReportData, report_data
from analysis.report.notebook import section
from analysis.report.page import MANIFEST, STYLE, TABLE_SCRIPT, claim_folder, table, write_manifest
from analysis.report.write import _png


def section_rows(name: str, data: ReportData) -> pd.DataFrame:
    return section(name).data(data)


def _matches(column: pd.Series, value) -> pd.Series:
    """Rows whose `column` is `value`: a number to 1e-6 relative (eps written as 0.0313725), a list any of its
    values, anything else as text (True matches the column's True)."""
    if isinstance(value, list):
        return column.astype(str).isin([str(v) for v in value])
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        numbers = pd.to_numeric(column, errors="coerce")
        return (numbers - value).abs() <= 1e-6 * max(abs(value), 1e-12)
    return column.astype(str) == str(value)


def ours(number: Number, data: ReportData) -> float | None:
    """Our value of a paper's number in `data`: the mean of its column over the matching rows; None when the
    number has no counterpart in the report or `data` holds no such rows."""
    if number.ours is None or (number.ours.sweeps and data.name not in number.ours.sweeps):
        return None
    rows = section_rows(number.ours.section, data)
    for column, value in number.ours.where.items():
        if column not in rows.columns:
            return None
        rows = rows[_matches(rows[column], value)]
    if number.ours.column not in rows.columns or not len(rows):
        return None
    value = pd.to_numeric(rows[number.ours.column], errors="coerce").mean()
    return None if pd.isna(value) else float(value) * number.ours.scale


def numbers_table(it: Item, datas: list[ReportData]) -> pd.DataFrame:
    """The paper's numbers of `it` beside ours (a column per results folder; empty where we have none)."""
    rows = []
    for n in it.numbers:
        row = {"row": n.row, "quantity": n.col, "paper's": n.value, "unit": n.unit}
        for data in datas:
            row[f"ours: {data.name}"] = ours(n, data)
        rows.append(row)
    return pd.DataFrame(rows)


def item_rows(it: Item, name: str, datas: list[ReportData]) -> list[tuple[str, pd.DataFrame]]:
    """(source, rows) for each drawing of section `name` in item `it`: one per results folder (source: its
    name), or, for an item that `combine`s them (the columns of one figure from several sweeps, Cianfarani et
    al. Fig. 2a-c), one of all their rows together (a `results` column says whose; source: the names joined
    by '+'); each restricted to the item's `where` (in the sections that have its columns)."""
    drawn = []
    for data in datas:
        rows = section(name).data(data)
        for column, value in it.where.items():  # a value, or a list of values
            rows = rows[_matches(rows[column], value)] if column in rows.columns else rows
        if len(rows):
            drawn.append((data.name, rows.assign(results=data.name) if it.combine else rows))
    if it.combine and len(drawn) > 1:
        return [("+".join(n for n, _ in drawn), pd.concat([r for _, r in drawn], ignore_index=True))]
    return drawn


def item_anchor(it: Item) -> str:
    return re.sub(r"[^a-z0-9]+", "-", it.item.lower()).strip("-")


def drawing_key(it: Item, name: str) -> tuple:
    """What makes section `name`'s drawing in item `it`: two items with the same key draw the same thing."""
    return (name, repr(sorted(it.where.items())), it.combine)


def item_drawings(it: Item, datas: list[ReportData], short: str) -> list[tuple[str, str, str, object]]:
    """(section, source, label, drawing) for each drawing of item `it`: an Altair chart titled with the paper's
    item name (and, with several results folders, their names), or a table section's rows."""
    out = []
    for name in it.sections:
        s = section(name)
        for source, rows in item_rows(it, name, datas):
            label = f"{short} {it.item}" + (f" ({source.replace('+', ', ')})" if len(datas) > 1 else "")
            out.append((name, source, label, s.chart(rows).properties(title=label) if hasattr(s, "chart") else rows))
    return out


def _item_html(it: Item, datas: list[ReportData], out: Path, short: str, drawn_at: dict) -> str:
    """An item's block of the page. `drawn_at`: drawing -> the item that drew it first, for the page: an item
    that would draw the same rows of the same section as an earlier one (the paper splits into several figures
    what one section draws, e.g. Balogh & Jelasity 2023's stitching plots) links to that drawing instead."""
    head = f"<h2 id='{item_anchor(it)}'>{html.escape(short)} {html.escape(it.item)}</h2><p>{html.escape(it.caption)}"
    if it.layout:
        head += f" <i>Layout: {html.escape(it.layout)}</i>"
    head += "</p>"
    if it.status != "runs":
        return head + f"<p><b>{html.escape(it.status)}</b>: {html.escape(it.reason)}</p>"
    parts, same = [], []
    for name in it.sections:
        key = drawing_key(it, name)
        if key in drawn_at:
            same.append(f"<a href='#{item_anchor(drawn_at[key])}'>{html.escape(drawn_at[key].item)}</a>")
    if same and len(same) == len(it.sections):  # every drawing is an earlier item's
        parts.append(f"<p>Drawn above with {', '.join(dict.fromkeys(same))}: the same rows of the same section.</p>")
    for name, source, label, drawn in [] if parts else item_drawings(it, datas, short):
        drawn_at.setdefault(drawing_key(it, name), it)
        if isinstance(drawn, pd.DataFrame):
            columns = section(name).columns or list(drawn.columns)
            parts.append(f"<h3>{html.escape(label)}</h3>" + table(drawn, columns))
            continue
        stem = f"{item_anchor(it)}_{name}_{re.sub(r'[^A-Za-z0-9_.-]+', '_', source)}"
        _png(drawn, out / f"{stem}.png")
        (out / f"{stem}.vl.json").write_text(json.dumps(drawn.to_dict()))
        parts.append(f"<p><img src='{stem}.png' alt='{html.escape(label)}'></p>")
    if not parts:
        parts.append(f"<p>No rows for this item in these results (made by: {html.escape(', '.join(it.spaces))}).</p>")
    if it.numbers:
        numbers = numbers_table(it, datas)
        parts.append("<h3>The paper's numbers beside ours</h3>" + table(numbers, list(numbers.columns)))
    return head + "".join(parts)


def write_paper_report(name: str, results: list, out: str | Path) -> Path:
    """Write `out/index.html`: paper `name`'s items in order, drawn from every results folder of `results`."""
    p, out = paper(name), Path(out)
    owner = f"paper:{p.slug}"
    claim_folder(out, owner)
    write_manifest(out, owner, [])
    datas = [report_data(r)[0] for r in results]
    with alt.data_transformers.disable_max_rows():
        drawn_at: dict = {}
        body = "".join(_item_html(it, datas, out, p.short, drawn_at) for it in items(p.slug))
    sources = ", ".join(html.escape(d.name) for d in datas)
    index = out / "index.html"
    index.write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(p.short)}: stitchsweep</title>"
        f"{STYLE}</head><body><h1>{html.escape(p.short)}: every item, from {sources}</h1>"
        f"<p>{html.escape(p.citation)}. Items in the paper's order; <i>the paper's</i> columns are the numbers its"
        f" text gives, <i>ours</i> the same quantity in these results.</p>{body}{TABLE_SCRIPT}</body></html>"
    )
    write_manifest(out, owner, [f.name for f in out.iterdir() if f.name != MANIFEST])
    return index
