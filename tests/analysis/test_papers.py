"""The paper-items registry (analysis/papers): every entry points at things that exist (spaces, report
sections, departures, reduced runs), `stitchsweep figures` lists it, the docs' pages are generated from it, and
`stitchsweep report --paper` draws a paper's items in order with the paper's numbers beside ours."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis.papers import PAPERS, STATUSES, Item, RegistryError, _item, items
from analysis.papers.pages import github_anchor, render
from sweep.cli import EXIT_BAD_INPUT, main
from tests.conftest import REPO


def _departures() -> set[str]:
    text = (REPO / "docs" / "design.md").read_text().split("## Departures from the papers", 1)[1]
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| paper, where")]
    return {row[2:].split(" | ", 1)[0].strip() for row in rows}


def _sections() -> set[str]:
    import analysis

    return set(analysis.figures()) | set(analysis.tables())


def test_every_paper_has_its_items_in_order_with_a_known_status():
    assert set(PAPERS) == {i.paper for i in items()}
    for slug in PAPERS:
        found = items(slug)
        assert all(i.status in STATUSES for i in found)
        assert len({i.item for i in found}) == len(found)
    # the numbers the papers' texts give for the items the registry names
    jones = {i.item: i for i in items("jones-2022")}
    assert [n.value for n in jones["Fig. 3"].numbers] == [0.67, 0.09]
    assert [n.value for n in jones["Fig. 4"].numbers] == [0.83, 0.80]
    assert [n.value for n in jones["Fig. 7"].numbers] == [93.9, 83.2]
    tables = {(i.paper, i.item): len(i.numbers) for i in items() if i.kind == "table"}
    assert tables[("balogh-jelasity-2025", "Table 1")] == 24 and tables[("cianfarani-2022", "Table 1")] == 12
    assert tables[("smith-marcu-2024", "Table C1")] > 0 and tables[("balogh-jelasity-2023", "Table 1")] > 0


def test_every_entry_names_spaces_sections_departures_and_runs_that_exist():
    sections, departures = _sections(), _departures()
    reproductions = (REPO / "docs" / "reproductions.md").read_text()
    headings = {line[3:].strip() for line in reproductions.splitlines() if line.startswith("## ")}
    for it in items():
        where = f"{it.paper} {it.item}"
        assert it.status == "runs" or it.reason, where
        for space in it.spaces:
            assert (REPO / "search_spaces" / space).is_file(), f"{where}: no space {space}"
        assert set(it.sections) <= sections, f"{where}: unknown sections {set(it.sections) - sections}"
        assert set(it.departures) <= departures, f"{where}: not a departure {set(it.departures) - departures}"
        assert not it.reduced_run or it.reduced_run in headings, f"{where}: no heading {it.reduced_run!r}"
        for n in it.numbers:
            assert n.ours is None or n.ours.section in sections, f"{where}: {n.ours}"


def test_a_malformed_entry_is_refused_naming_its_field():
    good = {"item": "Fig. 9", "kind": "figure", "caption": "c", "status": "runs", "spaces": ["a.yaml"]}
    with pytest.raises(RegistryError, match="names its spaces and its report sections"):
        _item("jones-2022", good, "jones-2022.json, item 'Fig. 9'")
    with pytest.raises(RegistryError, match="field 'status' must be one of"):
        _item("jones-2022", dict(good, status="done"), "x")
    with pytest.raises(RegistryError, match="'reason' is required"):
        _item("jones-2022", dict(good, status="missing"), "x")
    with pytest.raises(RegistryError, match=r"unknown field\(s\) \['colour'\]"):
        _item("jones-2022", dict(good, colour="red"), "x")
    assert isinstance(_item("jones-2022", dict(good, sections=["donors"]), "x"), Item)


def test_reading_the_registry_loads_no_pandas_altair_torch_or_ray():
    code = (
        "import sys; from analysis.papers import items; from analysis.papers.pages import render; items();"
        " render('jones-2022', {}); print(sorted(m for m in ('pandas', 'altair', 'torch', 'ray') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_figures_lists_items_as_json_and_refuses_an_unknown_paper(capsys):
    assert main(["figures", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc) == len(items())
    for field in ("paper", "item", "status", "space", "section", "caption", "reduced_run", "paper_scale"):
        assert all(field in d for d in doc), field
    assert main(["figures", "--paper", "smith-marcu-2024"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(items("smith-marcu-2024")) and all(line.startswith("Smith & Marcu 2024") for line in lines)
    assert main(["figures", "--paper", "smith-2024"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "--paper" in err and "smith-2024" in err and "smith-marcu-2024" in err


def test_the_docs_pages_are_generated_from_the_registry():
    measured = json.loads((REPO / "docs" / "papers" / "measured.json").read_text())
    named = {s for it in items() for s in it.spaces}
    assert named <= set(measured["estimates"]), "run: python tests/scripts/paper_pages.py --write"
    for slug in PAPERS:
        page = (REPO / "docs" / "papers" / f"{slug}.md").read_text()
        assert page == render(slug, measured), f"docs/papers/{slug}.md: run python tests/scripts/paper_pages.py --write"
        for it in items(slug):
            assert f"### {it.item}\n" in page and f"(#{github_anchor(it.item)})" in page


def _identification_results(root: Path) -> None:
    """Hand-made trials of two ResNet-18 donors over three layers: CKA and DM (functional) peak on the diagonal,
    TLM prefers the last end layer (as tests/analysis/test_matrices.py)."""
    from sweep.store.results import write_rows
    from sweep.store.schema import trial_schema

    points = ["l1", "l2", "l3"]
    k = 0
    for front, end in (("zoo:a", "zoo:a"), ("zoo:a", "zoo:b")):
        for i, fp in enumerate(points, start=1):
            for j, ep in enumerate(points, start=1):
                base = dict(status="done", front=front, end=end, front_point=fp, end_point=ep, point_index=i)
                base.update(end_index=j, seed=0, sim_cka=1.0 - 0.2 * abs(i - j))
                for objective, acc in (("dm", 1.0 - 0.1 * abs(i - j)), ("dm+tlm", 0.5 + 0.1 * j), ("tlm", 0.4)):
                    row = dict(base, objective=objective, relative_acc=acc, trial_id=str(k))
                    write_rows(root / "trials" / f"{k}.parquet", [row], trial_schema())
                    k += 1


def test_a_papers_page_draws_its_items_in_order_with_the_papers_numbers_beside_ours(tmp_path):
    from analysis.report.data import report_data
    from analysis.report.paper import numbers_table, section_rows, write_paper_report

    root = tmp_path / "tlm_vs_dm_cifar10"
    _identification_results(root)
    index = write_paper_report("balogh-jelasity-2025", [root], tmp_path / "page")
    text = index.read_text()
    found = items("balogh-jelasity-2025")
    positions = [text.index(f"Balogh &amp; Jelasity 2025 {it.item}</h2>") for it in found]
    assert positions == sorted(positions)
    table1 = next(it for it in found if it.item == "Table 1")
    data = report_data(root)[0]
    numbers = numbers_table(table1, [data]).set_index(["row", "quantity"])
    ident = section_rows("layer_identification", data).set_index(["measure", "kind"])["accuracy"]
    # by hand: CKA and DM pick the same layer in all three rows, TLM (always the last end layer) in one of three
    assert ident[("cka", "intra")] == 1.0 and ident[("dm+tlm", "inter")] == pytest.approx(1 / 3)
    assert numbers.loc[("LCKA", "Intra-network / RN-18"), "ours: tlm_vs_dm_cifar10"] == pytest.approx(100.0)
    assert numbers.loc[("TLM", "Inter-network / RN-18"), "ours: tlm_vs_dm_cifar10"] == pytest.approx(100 / 3)
    assert numbers.loc[("TLM", "Inter-network / RN-18"), "paper's"] == 35.28
    assert pd.isna(numbers.loc[("LCKA", "Inter-network / ViT-Ti"), "ours: tlm_vs_dm_cifar10"])  # another space's
    spec = json.loads(next((tmp_path / "page").glob("fig-1a_layer_matrices_*.vl.json")).read_text())
    assert spec["title"] == "Balogh & Jelasity 2025 Fig. 1a"
    drawn = [r for rows in spec["datasets"].values() for r in rows]  # a heatmap per donor pair
    assert {r["measure"] for r in drawn} == {"tlm"}  # the registry's where: Fig. 1a is the TLM matrix alone
    blocks = {b.split("</h2>", 1)[0].split("2025 ", 1)[1]: b for b in text.split("<h2 ")[1:]}
    assert "No rows for this item" in blocks["Fig. 1c"]  # no energies in these results: said, not drawn empty
    assert "<img src='fig-1a_layer_matrices_tlm_vs_dm_cifar10.png'" in blocks["Fig. 1a"]


def test_report_paper_takes_several_results_and_names_a_bad_paper(tmp_path, capsys):
    a, b = tmp_path / "tlm_vs_dm_cifar10", tmp_path / "tlm_vs_dm_fmnist"
    _identification_results(a)
    _identification_results(b)
    out = tmp_path / "page"
    assert main(["report", str(a), str(b), "--paper", "balogh-jelasity-2025", "--out", str(out)]) == 0
    text = (out / "index.html").read_text()
    assert "ours: tlm_vs_dm_cifar10" in text and "ours: tlm_vs_dm_fmnist" in text
    assert main(["report", str(a), str(b)]) == EXIT_BAD_INPUT
    assert "several only with --paper" in capsys.readouterr().err
    assert main(["report", str(a), "--paper", "nobody-1999"]) == EXIT_BAD_INPUT
    assert "--paper" in capsys.readouterr().err


def test_an_item_that_combines_results_draws_them_once_together():
    """Cianfarani et al. Fig. 2a-c takes its columns from two sweeps: one drawing of both folders' rows (with
    a `results` column), where another item gets one drawing per folder; `where` still applies."""
    from analysis.papers import Item
    from analysis.report.data import ReportData
    from analysis.report.paper import item_rows

    def data(name, ref, arch):
        sim = pd.DataFrame(
            [dict(unit_id=f"u-{name}", status="done", a=ref, b=ref, a_inputs="benign", b_inputs="benign", a_point=p,
                  b_point=q, a_index=i, b_index=j, cka=1.0 if p == q else 0.5, name="layers", measure="cka")
             for i, p in enumerate("xy") for j, q in enumerate("xy")]
        )  # fmt: skip
        donors = pd.DataFrame([dict(ref=ref, arch=arch, training="plain", train_eps=None)])
        return ReportData(name, {"donors": donors, "similarity": sim})

    datas = [data("cifar", "zoo:plain_c", "wrn28_10"), data("nette", "zoo:plain_n", "resnet18_imagenet")]
    fig2 = next(it for it in items("cianfarani-2022") if it.item == "Fig. 2a-c")
    assert fig2.combine
    ((source, rows),) = item_rows(fig2, "cka_within_networks", datas)
    assert source == "cifar+nette" and set(rows["results"]) == {"cifar", "nette"} and len(rows) == 8
    apart = Item(paper="x", item="y", kind="figure", caption="", status="runs")
    assert [s for s, _ in item_rows(apart, "cka_within_networks", datas)] == ["cifar", "nette"]
    picky = Item(paper="x", item="y", kind="figure", caption="", status="runs", where={"a": "zoo:plain_n"})
    assert [s for s, _ in item_rows(picky, "cka_within_networks", datas)] == ["nette"]
