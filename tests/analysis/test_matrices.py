"""Layer matrices and the layer-identification table (Balogh & Jelasity 2025 Table 1) on hand-made trial rows."""

import pandas as pd
import pytest

from analysis.charts.stitching import heatmap_grid
from analysis.matrices import layer_identification, layer_matrix, long_matrices

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


def test_layer_identification_carries_its_interval_over_pairs_and_matrices_their_seed_counts():
    trials = _trials()
    # three more pairs like (a, a): four intra pairs, enough for a bootstrap interval
    extra = []
    for front in ("zoo:c", "zoo:d", "zoo:e"):
        t = trials[(trials["front"] == "zoo:a") & (trials["end"] == "zoo:a")].assign(front=front, end=front)
        extra.append(t)
    table = layer_identification(pd.concat([trials, *extra])).set_index(["measure", "kind"])
    row = table.loc[("cka", "intra")]
    assert row["pairs"] == 4 and row["interval"] == "95% bootstrap CI" and row["lo"] <= row["accuracy"] <= row["hi"]
    two = layer_identification(trials).set_index(["measure", "kind"]).loc[("cka", "inter")]
    assert two["pairs"] == 1 and two["interval"] == "min-max (fewer than 3 values)" and two["lo"] == two["hi"] == 1.0
    seeded = pd.concat([trials, trials.assign(seed=1)])
    long = long_matrices(seeded)
    assert set(long["seeds"]) == {2} and set(long_matrices(trials)["seeds"]) == {1}


def test_heatmaps_have_one_panel_per_measure():
    long = long_matrices(_trials())
    assert set(long["measure"]) == {"tlm", "dm", "cka", "opd"}
    spec = heatmap_grid(long).to_dict()
    assert len(spec["vconcat"]) == 2 and len(spec["vconcat"][0]["hconcat"]) == 4


def test_report_writes_matrices_and_table_1(tmp_path):
    from analysis.report.write import write_report
    from sweep.store.results import write_rows
    from sweep.store.schema import trial_schema

    for k, row in enumerate(_trials().to_dict("records")):
        write_rows(tmp_path / "s" / "trials" / f"{k}.parquet", [dict(row, trial_id=str(k))], trial_schema())
    index = write_report(tmp_path / "s", tmp_path / "r")
    assert (tmp_path / "r" / "layer_matrices.png").stat().st_size > 1000
    md = (tmp_path / "r" / "layer_identification.md").read_text()
    assert md.startswith("| measure | kind | pairs | layers | accuracy |") and "| cka | inter | 1 | 3 | 1.000 |" in md
    assert "Layer identification" in index.read_text()


def test_within_networks_keeps_self_benign_units_and_labels_their_training():
    """Figs 2-3's layout reads only a network against itself on benign images, labelled by the donor's
    architecture, training and eps; cross-network and adversarial units are left to the other sections."""
    from analysis.charts import cka

    def unit(uid, a, b, b_inputs="benign"):
        return [
            dict(unit_id=uid, status="done", a=a, b=b, a_inputs="benign", b_inputs=b_inputs, a_point=p, b_point=q,
                 a_index=i, b_index=j, cka=1.0 if p == q else 0.5, name="")
            for i, p in enumerate(["x", "y"]) for j, q in enumerate(["x", "y"])
        ]  # fmt: skip

    sim = pd.DataFrame(
        unit("u1", "zoo:p1", "zoo:p1") + unit("u2", "zoo:r1", "zoo:r1") + unit("u3", "zoo:p1", "zoo:r1")
        + unit("u4", "zoo:r1", "zoo:r1", "adversarial") + unit("u5", "zoo:p5", "zoo:p5")
        + unit("u6", "zoo:l2b", "zoo:l2b") + unit("u7", "zoo:l2a", "zoo:l2a")
    )  # fmt: skip
    donors = pd.DataFrame(
        [
            dict(ref="zoo:p1", arch="wrn28_1", training="plain", train_eps=None, eps=0.1),
            dict(ref="zoo:r1", arch="wrn28_1", training="pgd", train_eps=8 / 255, eps=0.1),
            dict(ref="zoo:r1", arch="wrn28_1", training="pgd", train_eps=8 / 255, eps=0.2),  # another evaluation
            dict(ref="zoo:p5", arch="wrn28_5", training="plain", train_eps=None, eps=0.1),
            dict(ref="zoo:l2a", arch="wrn28_1", training="pgd_l2", train_eps=0.25, eps=0.1),  # another threat
            dict(ref="zoo:l2b", arch="wrn28_1", training="pgd_l2", train_eps=0.5, eps=0.1),  # model, two budgets
        ]
    )
    rows = cka.within_networks(sim, donors)
    assert sorted(rows["unit_id"].unique()) == ["u1", "u2", "u5", "u6", "u7"] and len(rows) == 20
    labels = rows.drop_duplicates("unit_id").set_index("unit_id")
    assert labels.loc["u2", "setting"] == "pgd eps=0.03137" and labels.loc["u1", "setting"] == "plain"
    assert labels.loc["u5", "arch"] == "wrn28_5"
    chart = cka.within_grid(rows).to_dict()
    # one row per width, and the L2 networks a row of their own (Fig. 30), by budget
    assert [len(line["hconcat"]) for line in chart["vconcat"]] == [2, 2, 1]
    first = chart["vconcat"][0]["hconcat"][0]["title"]
    assert first.startswith("wrn28_1, plain")  # plain first, then the robust network
    assert [m["title"].split(": ")[1] for m in chart["vconcat"][1]["hconcat"]] == ["zoo:l2a", "zoo:l2b"]


def test_epoch_curves_average_units_and_carry_their_interval():
    """Cianfarani et al. Fig. 6 from hand-made rows: CKA with the final epoch, mean over a group's units, with
    min-max for two units and a bootstrap interval from three."""
    from analysis.charts import cka

    rows = []
    for unit, value in (("u1", 0.5), ("u2", 0.7), ("u3", 0.9)):
        for group, units in (("two", ("u1", "u2")), ("three", ("u1", "u2", "u3"))):
            if unit not in units:
                continue
            for epoch_a in (1, 2):
                rows.append(dict(unit_id=f"{group}-{unit}", status="done", name=group, donor="zoo:d", inputs="benign",
                                 point="l1", point_index=1, epoch_a=epoch_a, epoch_b=2, final_epoch=2,
                                 cka=value if epoch_a == 1 else 1.0))  # fmt: skip
    curves = cka.epoch_curves(pd.DataFrame(rows)).set_index(["group", "epoch_a"])
    two = curves.loc[("two (benign)", 1)]
    assert two["cka"] == pytest.approx(0.6) and (two["lo"], two["hi"]) == (0.5, 0.7) and two["units"] == 2
    three = curves.loc[("three (benign)", 1)]
    assert three["cka"] == pytest.approx(0.7) and three["interval"] == "95% bootstrap CI"
    assert 0.5 <= three["lo"] < 0.7 < three["hi"] <= 0.9
    chart = cka.epoch_curve_chart(curves.reset_index()).to_dict()
    title = chart["spec"]["layer"][1]["encoding"]["y"]["title"]  # the band's name on a line of its own
    assert title[0] == "CKA with the final epoch" and title[1].startswith("band: 95% bootstrap CI / min-max")


def test_matrix_cells_not_above_their_permutation_null_are_marked_and_faded():
    trials = _trials()
    # a null for cka: the diagonal beats it (p = 0.01), the rest does not (p = 0.4)
    trials["sim_cka_p"] = [0.01 if r.front_point == r.end_point else 0.4 for r in trials.itertuples()]
    long = long_matrices(trials)
    cka = long[long["measure"] == "cka"]
    assert (cka["above_null"] == (cka["front_point"] == cka["end_point"])).all()
    assert long[long["measure"] == "tlm"]["above_null"].isna().all()  # no null for a stitching measure
    spec = heatmap_grid(long).to_dict()
    opacity = spec["vconcat"][0]["hconcat"][2]["encoding"]["opacity"]
    assert opacity["condition"]["test"] == "datum.above_null === false" and opacity["condition"]["value"] == 0.3


def test_agreement_table_is_mean_and_standard_error_over_pairs_of_different_donors():
    from analysis.matrices import agreement_table

    rows = [  # (front, end, objective, head_agreement, agree_disagree)
        ("zoo:a", "zoo:b", "dm", 0.9, 0.2),
        ("zoo:b", "zoo:a", "dm", 0.7, 0.4),
        ("zoo:a", "zoo:c", "dm", 0.8, 0.6),
        ("zoo:a", "zoo:a", "dm", 1.0, float("nan")),  # self-stitching: left out
        ("zoo:a", "zoo:b", "tlm", 0.5, 0.1),  # a group of one: no standard error
    ]
    trials = pd.DataFrame(
        [
            dict(front=f, end=e, objective=o, front_point="p", end_point="p", head_agreement=h, agree_disagree=a)
            for f, e, o, h, a in rows
        ]
    )
    table = agreement_table(trials).set_index("objective")
    dm = table.loc["dm"]
    assert dm["pairs"] == 3 and dm["head_agreement"] == pytest.approx(0.8)
    # sample std of (0.9, 0.7, 0.8) is 0.1: standard error 0.1 / sqrt(3)
    assert dm["head_agreement_se"] == pytest.approx(0.1 / 3**0.5)
    assert dm["agree_disagree"] == pytest.approx(0.4) and dm["agree_disagree_se"] == pytest.approx(0.2 / 3**0.5)
    assert table.loc["tlm", "pairs"] == 1 and pd.isna(table.loc["tlm", "head_agreement_se"])
    assert agreement_table(trials[trials["front"] == trials["end"]]).empty


def test_block_structure_averages_cka_between_distant_points_only():
    """Cianfarani et al. Fig. 2's block structure as a number: the mean CKA over pairs of points more than `gap`
    apart, computed here by a plain loop over a 30-point matrix whose value is a known function of the distance."""
    from analysis.charts import cka

    n, gap = 30, 20
    value = lambda i, j: 1.0 if i == j else 1.0 / (1 + abs(i - j))  # noqa: E731
    sim = pd.DataFrame(
        [
            dict(unit_id="u", status="done", a="zoo:p", b="zoo:p", a_inputs="benign", b_inputs="benign",
                 a_point=f"n{i}", b_point=f"n{j}", a_index=i, b_index=j, cka=value(i, j), name="")
            for i in range(n) for j in range(n)
        ]
    )  # fmt: skip
    donors = pd.DataFrame([dict(ref="zoo:p", arch="wrn28_1", training="plain", train_eps=None, eps=0.1)])
    (row,) = cka.block_structure(sim, donors, gap=gap).to_dict("records")
    far = [value(i, j) for i in range(n) for j in range(n) if abs(i - j) > gap]
    off = [value(i, j) for i in range(n) for j in range(n) if i != j]
    assert row["pairs"] == len(far) == 2 * sum(n - d for d in range(gap + 1, n)) and row["points"] == n
    assert row["far_cka"] == pytest.approx(sum(far) / len(far)) and row["mean_cka"] == pytest.approx(
        sum(off) / len(off)
    )
    assert row["setting"] == "plain" and row["network"] == "zoo:p"


def test_cka_diagonals_draw_figs_4_and_5_apart_by_point_family():
    """Figs 4 and 5b-d: benign vs adversarial of one network, and source vs target on the source's adversarial
    images; a network with itself on benign images (1 everywhere) and two networks on benign images are not
    drawn; units over different point sets (block outputs, every node) get their own panels."""
    from analysis.charts import cka

    def unit(uid, a, b, a_in, b_in, points):
        return [
            dict(unit_id=uid, status="done", a=a, b=b, a_inputs=a_in, b_inputs=b_in, a_point=p, b_point=p,
                 a_index=i, b_index=i, cka=0.5, name="", attack_source=a if "adversarial" in (a_in, b_in) else None)
            for i, p in enumerate(points)
        ]  # fmt: skip

    blocks, nodes = ["l1", "l2", "l3"], [f"n{i}" for i in range(7)]
    sim = pd.DataFrame(
        unit("self", "zoo:p", "zoo:p", "benign", "benign", blocks)
        + unit("fig4", "zoo:p", "zoo:p", "benign", "adversarial", blocks)
        + unit("fig4_nodes", "zoo:p", "zoo:p", "benign", "adversarial", nodes)
        + unit("fig5", "zoo:p", "zoo:r", "adversarial", "adversarial", blocks)
        + unit("cross_benign", "zoo:p", "zoo:r", "benign", "benign", blocks)
    )
    d = cka.diagonals(sim)
    assert set(d["unit_id"]) == {"fig4", "fig4_nodes", "fig5"}
    assert set(d.loc[d["unit_id"] == "fig5", "figure"]) == {cka.FIG5}
    assert set(d.loc[d["unit_id"] == "fig4", "figure"]) == {cka.FIG4}
    assert d.groupby("unit_id")["family"].first().to_dict() == {
        "fig4": "3 points", "fig4_nodes": "7 points", "fig5": "3 points"
    }  # fmt: skip
    spec = cka.diagonal_chart(d).to_dict()
    assert spec["facet"]["row"]["field"] == "figure" and spec["facet"]["column"]["field"] == "family"


def test_budget_steps_compare_one_methods_networks_across_budgets_only():
    """Fig. 30's numbers from hand-made rows: two networks of one training method at different budgets, on benign
    images; pairs across methods, at one budget or on adversarial images are left out; means by hand."""
    from analysis.charts import cka

    def unit(uid, a, b, values, b_inputs="benign"):
        return [
            dict(unit_id=uid, status="done", a=a, b=b, a_inputs="benign", b_inputs=b_inputs, a_point=p, b_point=q,
                 a_index=i, b_index=j, cka=values[2 * i + j], name="fig30")
            for i, p in enumerate(["x", "y"]) for j, q in enumerate(["x", "y"])
        ]  # fmt: skip

    sim = pd.DataFrame(
        unit("u1", "zoo:l2a", "zoo:l2b", [0.9, 0.2, 0.4, 0.7])  # the one kept: diagonal 0.8, all 0.55
        + unit("u2", "zoo:l2a", "zoo:linf", [0.5] * 4)  # two threat models
        + unit("u3", "zoo:l2a", "zoo:l2c", [0.5] * 4)  # one budget (another seed)
        + unit("u4", "zoo:l2a", "zoo:l2b", [0.5] * 4, "adversarial")
    )
    donors = pd.DataFrame(
        [
            dict(ref="zoo:l2a", arch="wrn28_1", training="pgd_l2", train_eps=0.25),
            dict(ref="zoo:l2b", arch="wrn28_1", training="pgd_l2", train_eps=0.5),
            dict(ref="zoo:l2c", arch="wrn28_1", training="pgd_l2", train_eps=0.25),
            dict(ref="zoo:linf", arch="wrn28_1", training="pgd", train_eps=0.5),
        ]
    )
    (row,) = cka.budget_steps(sim, donors).to_dict("records")
    assert (row["a"], row["b"], row["a_eps"], row["b_eps"], row["points"]) == ("zoo:l2a", "zoo:l2b", 0.25, 0.5, 2)
    assert row["diagonal_cka"] == pytest.approx(0.8) and row["mean_cka"] == pytest.approx(0.55)


def test_threat_grid_puts_each_reference_network_in_a_row_in_the_papers_order():
    """Fig. 7's 2 x 5 layout from hand-made units: the networks that are side A of two or more units with other
    threat models are the rows (L-inf, then Snow), their own map first, then one per threat model in the order
    L-inf, L2, JPEG, Gabor, Snow; a unit whose reference is side B is transposed (its layers become the rows);
    two budgets of one threat model are left to Fig. 30's table, and a budget neighbour against another threat
    model (Appendix E: `linf` against `jpeg_large`, `linf_large` against Snow and JPEG) to its own, in the
    sweep's report (every entry's units) as on the paper's page (the `threats` entry's)."""
    from analysis.charts import grids

    def unit(uid, a, b, xy=0.5, yx=0.5, name="threats"):
        values = {("x", "x"): 1.0, ("x", "y"): xy, ("y", "x"): yx, ("y", "y"): 1.0}
        return [
            dict(unit_id=uid, status="done", a=a, b=b, a_inputs="benign", b_inputs="benign", a_point=p, b_point=q,
                 a_index=i, b_index=j, cka=values[p, q], name=name)
            for i, p in enumerate(["x", "y"]) for j, q in enumerate(["x", "y"])
        ]  # fmt: skip

    sim = pd.DataFrame(
        unit("s1", "zoo:linf", "zoo:linf") + unit("c1", "zoo:linf", "zoo:snow", xy=0.3, yx=0.6)
        + unit("c2", "zoo:linf", "zoo:l2") + unit("c3", "zoo:snow", "zoo:l2") + unit("c4", "zoo:snow", "zoo:jpeg")
        + unit("s2", "zoo:snow", "zoo:snow")
        + unit("b1", "zoo:linf", "zoo:linf_large") + unit("b2", "zoo:linf", "zoo:linf_x")
        + unit("e1", "zoo:linf", "zoo:jpeg_large", name="budgets") + unit("e2", "zoo:linf_large", "zoo:snow",
        name="budgets") + unit("e3", "zoo:linf_large", "zoo:jpeg", name="budgets")
    )  # fmt: skip
    donors = pd.DataFrame(
        [dict(ref=f"zoo:{n}", training=t) for n, t in [("linf", "pgd"), ("snow", "adv_snow"), ("l2", "pgd_l2"),
         ("jpeg", "adv_jpeg"), ("linf_large", "pgd"), ("linf_x", "pgd"), ("jpeg_large", "adv_jpeg")]]
    )  # fmt: skip
    page = grids.threat_rows(sim[sim["name"] == "threats"], donors)  # the registry's Fig. 7: `where: threats`
    assert [len(line["hconcat"]) for line in grids.threat_grid(page).to_dict()["vconcat"]] == [3, 4]
    rows = grids.threat_rows(sim, donors)
    layout = rows.drop_duplicates(["row", "unit_id"]).groupby("row", sort=False)["unit_id"].apply(list)
    assert list(layout.index) == ["zoo:linf", "zoo:snow"]
    order = {r: [u for _, u in sorted(zip(rows[rows.row == r].drop_duplicates("unit_id")["column"], layout[r]))]
             for r in layout.index}  # fmt: skip
    assert order == {"zoo:linf": ["s1", "c2", "c1"], "zoo:snow": ["s2", "c1", "c3", "c4"]}
    moved = rows[(rows["row"] == "zoo:snow") & (rows["unit_id"] == "c1")].set_index(["a_point", "b_point"])["cka"]
    assert (moved[("y", "x")], moved[("x", "y")]) == (0.3, 0.6)  # transposed: snow's layers are the rows
    assert (rows["a"][rows["row"] == "zoo:snow"] == "zoo:snow").all()
    chart = grids.threat_grid(rows).to_dict()
    assert [len(line["hconcat"]) for line in chart["vconcat"]] == [3, 4]


def test_eps_width_grid_has_a_row_per_budget_and_widths_in_numeric_order():
    """Fig. 3's layout from hand-made units: plain and PGD networks with themselves, a row per budget (plain
    first), widths as columns in numeric order (wrn28_5 before wrn28_10), a blank cell where no network is;
    TRADES is left to the other grids."""
    from analysis.charts import grids

    def unit(uid, a):
        return [
            dict(unit_id=uid, status="done", a=a, b=a, a_inputs="benign", b_inputs="benign", a_point=p, b_point=q,
                 a_index=i, b_index=j, cka=1.0 if p == q else 0.5, name="")
            for i, p in enumerate(["x", "y"]) for j, q in enumerate(["x", "y"])
        ]  # fmt: skip

    nets = [  # ref, arch, training, eps
        ("p1", "wrn28_1", "plain", None), ("p10", "wrn28_10", "plain", None), ("p5", "wrn28_5", "plain", None),
        ("r1", "wrn28_1", "pgd", 8 / 255), ("r10", "wrn28_10", "pgd", 8 / 255), ("q10", "wrn28_10", "pgd", 16 / 255),
        ("t10", "wrn28_10", "trades", 8 / 255),
    ]  # fmt: skip
    sim = pd.DataFrame([row for ref, *_ in nets for row in unit(ref, f"zoo:{ref}")])
    donors = pd.DataFrame([dict(ref=f"zoo:{r}", arch=a, training=t, train_eps=e) for r, a, t, e in nets])
    rows = grids.eps_width_rows(sim, donors)
    assert "t10" not in set(rows["unit_id"])
    cells = rows.drop_duplicates("unit_id").set_index("unit_id")
    assert cells.loc["p5", "column"] == 1 and cells.loc["p10", "column"] == 2 and cells.loc["r1", "column"] == 0
    chart = grids.eps_width_grid(rows).to_dict()
    titles = [[m.get("title", "") for m in line["hconcat"]] for line in chart["vconcat"]]
    assert [len(t) for t in titles] == [3, 3, 3]  # plain, 8/255, 16/255; every row as wide as the widths
    assert titles[0][0].startswith("wrn28_1, plain") and titles[0][2].startswith("wrn28_10, plain")
    assert titles[1][1] == "" and titles[2][:2] == ["", ""]  # no wrn28_5 at 8/255; only wrn28_10 at 16/255
