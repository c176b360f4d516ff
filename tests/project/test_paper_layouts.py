"""Every registered paper item that `runs`, drawn from results made by hand from the spaces it names
(`tests/synthetic.py`: every unit each space plans, with the space's own keys and made-up numbers), without a
browser. For each item: each of its sections finds rows in one of its spaces (so the registry's `where`, the
section's filters and what the spaces produce still agree); each chart carries the item's title, names its
axes, and has a legend and panels whose fixed orders hold every series and panel the rows have; each
number of the paper that has a counterpart in our results finds one."""

from __future__ import annotations

import altair as alt
import pandas as pd
import pytest

from analysis.papers import items, paper
from analysis.report.data import report_data
from analysis.report.paper import drawing_key, item_drawings, item_rows, ours
from tests.conftest import REPO
from tests.synthetic import synthetic_results

RUNS = [it for it in items() if it.status == "runs"]
# spaces that read the user's own files (checkpoints, ImageNet): they do not load without them
OWN_FILES = ("own_checkpoints/",)
POSITIONAL = ("x", "y")
ORDERED = ("color", "row", "column", "facet", "strokeDash", "shape")  # channels whose fixed order is checked
NOMINAL = ("nominal", "ordinal")
CHECKED: set[tuple] = set()  # drawings already checked (several items may draw the same section the same way)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Space -> its made-up results (made the first time an item asks)."""
    made: dict[str, object] = {}

    def get(space: str):
        if space not in made:
            root = tmp_path_factory.mktemp("synthetic") / space.replace("/", "_").removesuffix(".yaml")
            made[space] = report_data(synthetic_results(REPO / "search_spaces" / space, root))[0]
        return made[space]

    return get


def _views(spec: dict):
    """The encodings of each view of a Vega-Lite spec that share axes: a unit chart's one, a layer's all
    (facets and concatenations walked into)."""
    if not isinstance(spec, dict):
        return
    if isinstance(spec.get("layer"), list):
        layers = [layer for layer in spec["layer"] if "layer" not in layer]
        yield [layer["encoding"] for layer in layers if isinstance(layer.get("encoding"), dict)]
        for layer in spec["layer"]:
            if "layer" in layer:
                yield from _views(layer)
    elif isinstance(spec.get("encoding"), dict):
        yield [spec["encoding"]]
    for key in ("hconcat", "vconcat", "concat", "spec"):
        value = spec.get(key)
        for child in value if isinstance(value, list) else [value] if value else []:
            yield from _views(child)


def _fixed_order(channel: dict) -> list | None:
    """The values a channel is told to show, in order (a sort list or a scale domain), or None."""
    sort = channel.get("sort")
    if isinstance(sort, list):
        return sort
    domain = (channel.get("scale") or {}).get("domain")
    return domain if isinstance(domain, list) else None


def _title(channel: dict):
    """The axis title a channel gives (None: no title, or no axis at all, on purpose; "": none given)."""
    if "axis" in channel and channel["axis"] is None:
        return None
    return channel["title"] if "title" in channel else (channel.get("axis") or {}).get("title", "")


def _check_chart(spec: dict, rows: pd.DataFrame, label: str) -> None:
    for view in _views(spec):
        for name in POSITIONAL:  # an axis of the view: titled by one of its layers, or hidden on purpose
            channels = [e[name] for e in view if isinstance(e.get(name), dict) and "field" in e[name]]
            titles = [_title(c) for c in channels]
            if channels and None not in titles:
                assert any(titles), f"{label}: axis {name} ({[c['field'] for c in channels]}) is not given a title"
        for enc in view:
            for name, channel in enc.items():
                if name not in ORDERED or not isinstance(channel, dict) or channel.get("type") not in NOMINAL:
                    continue
                order, field = _fixed_order(channel), channel.get("field")
                if order and field in rows:
                    found = {str(v) for v in rows[field].dropna().unique()}
                    missing = found - {str(v) for v in order}
                    assert not missing, f"{label}: {name} ({field}) orders {order}; the rows also hold {missing}"


@pytest.mark.parametrize("it", RUNS, ids=[f"{it.paper}:{it.item}" for it in RUNS])
def test_a_registered_item_draws_from_the_spaces_it_names(it, results):
    spaces = [s for s in it.spaces if not s.startswith(OWN_FILES)]
    if not spaces:
        pytest.skip(f"{it.item}: its spaces read the user's own files")
    datas = [results(s) for s in spaces]
    short = paper(it.paper).short
    found = {(name, source): rows for name in it.sections for source, rows in item_rows(it, name, datas)}
    for name in it.sections:
        assert name in {n for n, _ in found}, f"{short} {it.item}: {name} finds no rows in {spaces} ({it.where})"
    keys = {(n, source): (*drawing_key(it, n), source) for n, source in found}
    if not set(keys.values()) <= CHECKED:  # several items may draw a section the same way: check it once
        with alt.data_transformers.disable_max_rows():
            for name, source, label, drawn in item_drawings(it, datas, short):
                if isinstance(drawn, pd.DataFrame):
                    continue
                assert label == f"{short} {it.item}" + (f" ({source.replace('+', ', ')})" if len(datas) > 1 else "")
                spec = drawn.to_dict()  # validated against Vega-Lite's schema
                assert spec["title"] == label, f"{label}: the chart is titled {spec['title']!r}"
                _check_chart(spec, found[(name, source)], label)
        CHECKED.update(keys.values())
    datasets = {v for d in datas for v in d.donors.get("dataset", pd.Series(dtype=str)).dropna()}
    for n in it.numbers:  # a number on a dataset none of the loaded spaces has is another (own-files) space's
        if n.ours is not None and n.ours.where.get("dataset", next(iter(datasets), None)) in datasets:
            found = [v for v in (ours(n, d) for d in datas) if v is not None]
            assert found, f"{short} {it.item}: the paper's {n.row} / {n.col} finds no counterpart in {spaces}"
