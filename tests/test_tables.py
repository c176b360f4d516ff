"""Layer matrices and the layer-identification table (Balogh & Jelasity 2025 Table 1) on hand-made trial rows."""

import pandas as pd

from analysis.charts import heatmap_grid
from analysis.tables import layer_identification, layer_matrix, long_matrices

POINTS = ["l1", "l2", "l3"]


def _trials():
    rows = []
    for front, end in (("zoo:a", "zoo:a"), ("zoo:a", "zoo:b")):
        for i, fp in enumerate(POINTS, start=1):
            for j, ep in enumerate(POINTS, start=1):
                base = dict(
                    status="done",
                    front=front,
                    end=end,
                    front_point=fp,
                    end_point=ep,
                    point_index=i,
                    end_index=j,
                    seed=0,
                )
                # cka peaks on the diagonal; opd is a distance that is smallest there; tlm prefers the last layer
                cka = 1.0 - 0.2 * abs(i - j)
                rows.append(
                    dict(
                        base, objective="dm", relative_acc=1.0 - 0.1 * abs(i - j), sim_cka=cka, sim_opd=0.1 * abs(i - j)
                    )
                )
                rows.append(
                    dict(base, objective="tlm", relative_acc=0.5 + 0.1 * j, sim_cka=cka, sim_opd=0.1 * abs(i - j))
                )
    return pd.DataFrame(rows)


def test_layer_matrix_is_ordered_and_averaged():
    m = layer_matrix(_trials(), "zoo:a", "zoo:b", "tlm")
    assert list(m.index) == POINTS and list(m.columns) == POINTS
    assert m.loc["l1", "l3"] == 0.8


def test_layer_identification_scores_each_measure_intra_and_inter():
    table = layer_identification(_trials()).set_index(["measure", "kind"])["accuracy"]
    assert table[("dm", "intra")] == 1.0 and table[("cka", "inter")] == 1.0 and table[("opd", "inter")] == 1.0
    assert abs(table[("tlm", "intra")] - 1 / 3) < 1e-12  # tlm picks l3 for every row: right only for l3


def test_heatmaps_have_one_panel_per_measure():
    long = long_matrices(_trials())
    assert set(long["measure"]) == {"tlm", "dm", "cka", "opd"}
    spec = heatmap_grid(long).to_dict()
    assert len(spec["vconcat"]) == 2 and len(spec["vconcat"][0]["hconcat"]) == 4


def test_report_writes_matrices_and_table_1(tmp_path):
    from analysis.report import write_report
    from analysis.store.schema import trial_schema
    from sweep.results import write_rows

    for k, row in enumerate(_trials().to_dict("records")):
        write_rows(tmp_path / "s" / "trials" / f"{k}.parquet", [dict(row, trial_id=str(k))], trial_schema())
    index = write_report(tmp_path / "s", tmp_path / "r")
    assert (tmp_path / "r" / "layer_matrices.png").stat().st_size > 1000
    md = (tmp_path / "r" / "layer_identification.md").read_text()
    assert md.startswith("| measure | kind | pairs | layers | accuracy |") and "| cka | inter | 1 | 3 | 1.000 |" in md
    assert "Layer identification" in index.read_text()
