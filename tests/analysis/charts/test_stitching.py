"""Charts are checked through their Vega-Lite spec (`to_dict()`), not pixels."""

import pandas as pd

from analysis.charts.stitching import (
    END_LABEL,
    FRONT_LABEL,
    class_collapse_data,
    class_collapse_plot,
    cross_task_grid,
    is_cross_task,
    setting_label,
    stitching_data,
    stitching_grid,
    stitching_plot,
)


def _trials() -> pd.DataFrame:
    rows = []
    for obj in ("tlm", "dm"):
        for i, point in enumerate(["layer1.0", "layer1.1", "layer2.0"], start=1):
            for seed in (0, 1):
                rows.append(
                    dict(
                        status="done",
                        front="zoo:r",
                        end="zoo:p",
                        objective=obj,
                        front_point=point,
                        point_index=i,
                        seed=seed,
                        clean_acc=0.5 + 0.1 * i + 0.01 * seed,
                        robust_acc=0.1 * i,
                        end_clean_acc=0.9,
                        end_robust_acc=0.0,
                        front_clean_acc=0.8,
                        front_robust_acc=0.4,
                    )
                )
    rows.append(
        dict(
            status="failed", front="zoo:r", end="zoo:p", objective="tlm", front_point="layer2.0", point_index=3, seed=5
        )
    )
    return pd.DataFrame(rows)


def test_points_are_ordered_from_end_model_to_front_model_and_averaged_over_seeds():
    points, order = stitching_data(_trials(), "zoo:r", "zoo:p", "tlm")
    assert order == [END_LABEL, "layer1.0", "layer1.1", "layer2.0", FRONT_LABEL]
    acc = points[points["metric"] == "accuracy"].set_index("x")["value"]
    assert abs(acc["layer1.0"] - 0.605) < 1e-9  # mean of seeds 0 and 1; the failed trial is ignored
    assert acc[END_LABEL] == 0.9 and acc[FRONT_LABEL] == 0.8
    spread = points[(points["metric"] == "accuracy") & (points["x"] == "layer1.0")].iloc[0]
    assert (spread["lo"], spread["hi"]) == (0.6, 0.61)  # the seeds' min and max


def test_stitching_plot_has_donor_bands_and_sorted_axis():
    spec = stitching_plot(_trials(), "zoo:r", "zoo:p", "tlm").to_dict()
    band, whiskers, line = spec["layer"]
    assert whiskers["mark"]["type"] == "rule" and whiskers["encoding"]["y2"]["field"] == "hi"
    assert len(spec["datasets"][whiskers["data"]["name"]]) == 6  # 3 points x 2 metrics with two seeds each
    assert band["mark"]["type"] == "rect" and band["encoding"]["y2"]["field"] == "hi"
    assert line["encoding"]["x"]["sort"][0] == END_LABEL
    assert line["encoding"]["x"]["sort"][-1] == FRONT_LABEL
    bands = spec["datasets"][band["data"]["name"]]
    by_metric = {b["metric"]: (b["lo"], b["hi"]) for b in bands}
    assert by_metric == {"accuracy": (0.8, 0.9), "robust accuracy": (0.0, 0.4)}


def test_grid_has_a_row_per_pair_and_a_column_per_objective():
    spec = stitching_grid(_trials()).to_dict()
    assert len(spec["vconcat"]) == 1 and len(spec["vconcat"][0]["hconcat"]) == 2


def _robust_trials() -> pd.DataFrame:
    rows = []
    settings = [
        dict(objective="adv", alpha=0.5),
        dict(objective="adv", alpha=1.0),
        dict(objective="trades", beta=1.0),
        dict(objective="tlm", init="identity"),
    ]
    for extra in settings:
        for i, point in enumerate(["layer1.0", "layer2.0"], start=1):
            rows.append(
                dict(
                    status="done",
                    front="zoo:p",
                    end="zoo:q",
                    front_point=point,
                    point_index=i,
                    seed=0,
                    clean_acc=0.5,
                    robust_acc=0.1,
                    most_frequent_class_ratio=0.1 * i,
                    num_classes=10,
                    end_clean_acc=0.9,
                    end_robust_acc=0.0,
                    front_clean_acc=0.8,
                    front_robust_acc=0.4,
                    dataset="fashion_mnist",
                    front_dataset="fashion_mnist",
                    end_dataset="fashion_mnist",
                    stitch_data="sweep",
                    stitcher="affine",
                    **{"init": "random", **extra},
                )
            )
    for data in ("fashion_mnist", "digits"):
        rows.append(
            dict(
                status="done",
                front="zoo:p",
                end="zoo:d",
                objective="tlm",
                front_point="layer1.0",
                point_index=1,
                seed=0,
                clean_acc=0.7,
                robust_acc=0.0,
                most_frequent_class_ratio=0.2,
                num_classes=10,
                end_clean_acc=0.95,
                front_clean_acc=0.8,
                dataset=data,
                front_dataset="fashion_mnist",
                end_dataset="digits",
                stitch_data="front" if data == "fashion_mnist" else "end",
                init="random",
            )
        )
    return pd.DataFrame(rows)


def test_settings_name_the_options_that_distinguish_runs():
    labels = set(setting_label(_robust_trials()))
    assert labels == {
        "adv alpha=0.5",
        "adv alpha=1",
        "trades beta=1",
        "tlm init=identity",
        "tlm on fashion_mnist",
        "tlm on digits",
    }


def test_grid_has_one_panel_per_pair_and_setting_and_alpha():
    spec = stitching_grid(_robust_trials()).to_dict()
    panels = [len(row["hconcat"]) for row in spec["vconcat"]]
    assert sorted(panels) == [2, 4]  # zoo:p->zoo:d: two data roles; zoo:p->zoo:q: four settings


def test_class_collapse_plot_draws_the_one_over_classes_line():
    data, order, chance = class_collapse_data(_robust_trials(), "zoo:p", "zoo:q")
    assert chance == 0.1 and order == ["layer1.0", "layer2.0"]
    assert len(data) == 8 and set(data["setting"]) == {
        "adv alpha=0.5",
        "adv alpha=1",
        "trades beta=1",
        "tlm init=identity",
    }
    spec = class_collapse_plot(_robust_trials(), "zoo:p", "zoo:q").to_dict()
    whiskers, _, rule = spec["layer"]
    assert rule["mark"]["type"] == "rule" and spec["datasets"][rule["data"]["name"]] == [{"chance": 0.1}]
    assert whiskers["encoding"]["y"]["field"] == "lo" and whiskers["encoding"]["y2"]["field"] == "hi"
    assert (data["lo"] <= data["ratio"]).all() and (data["ratio"] <= data["hi"]).all()


def test_cross_task_grid_keeps_only_pairs_across_datasets():
    t = _robust_trials()
    assert is_cross_task(t).sum() == 2
    spec = cross_task_grid(t).to_dict()
    assert len(spec["vconcat"]) == 1 and len(spec["vconcat"][0]["hconcat"]) == 2
    assert "zoo:p (fashion_mnist) -> zoo:d (digits)" in str(spec)


def test_report_has_every_plot(tmp_path):
    from analysis.report.write import write_report
    from sweep.store.results import write_rows
    from sweep.store.schema import trial_schema

    results = tmp_path / "sweep"
    for i, row in enumerate(_robust_trials().to_dict("records")):
        row = {k: (None if isinstance(v, float) and pd.isna(v) else v) for k, v in row.items()}
        write_rows(results / "trials" / f"{i}.parquet", [dict(row, trial_id=str(i))], trial_schema())
    index = write_report(results, tmp_path / "report")
    for png in ("stitching.png", "most_frequent_class.png", "cross_task.png", "stitching_zoo_p__zoo_q.png"):
        assert (tmp_path / "report" / png).stat().st_size > 1000, png
    page = index.read_text()
    assert "Cross-task stitching" in page and "Class collapse" in page and "<h2>Trials</h2>" in page


def test_settings_that_differ_in_any_configuration_column_are_separate_curves():
    """Two blocks that differ only in lr, donor_bn or test size are two settings (never averaged into one
    curve); the seed and the stitch point are not settings."""
    base = _robust_trials()
    tlm = base[base["objective"] == "adv"].head(4).copy()
    tlm["objective"], tlm["alpha"], tlm["lr"], tlm["donor_bn"] = "tlm", None, 1e-3, "frozen"
    other = tlm.copy()
    other["lr"], other["seed"] = 1e-2, 7
    third = tlm.copy()
    third["donor_bn"] = "update"
    labels = setting_label(pd.concat([tlm, other, third], ignore_index=True))
    assert set(labels) == {
        "tlm lr=0.001 donor_bn=frozen",
        "tlm lr=0.01 donor_bn=frozen",
        "tlm lr=0.001 donor_bn=update",
    }
    same = tlm.copy()
    same["seed"], same["front_point"] = 9, "layer9"
    assert set(setting_label(pd.concat([tlm, same], ignore_index=True))) == {"tlm"}


def test_fig1c_draws_one_network_into_its_first_layer_from_every_layer_with_tlm():
    """Balogh & Jelasity 2025 Fig. 1c: of trials with energies, only one network stitched into itself, into its
    first point, with TLM (dm+tlm), from every layer; the top panel holds that layer's own ID and OOD energies."""
    from analysis.charts.energies import energy_density_chart, energy_rows

    points = ["layer1.0", "layer2.0", "layer3.0"]
    trials, energies = [], []
    for front, end in (("zoo:b", "zoo:b"), ("zoo:a", "zoo:a"), ("zoo:a", "zoo:b")):
        for obj in ("dm", "dm+tlm"):
            for i, fp in enumerate(points):
                for j, ep in enumerate(points):
                    tid = f"{front}>{end}:{fp}>{ep}:{obj}"
                    trials.append(
                        dict(
                            trial_id=tid,
                            status="done",
                            front=front,
                            end=end,
                            objective=obj,
                            front_point=fp,
                            end_point=ep,
                            point_index=i + 1,
                            end_index=j + 1,
                        )
                    )
                    for kind in ("target", "stitched", "outlier"):
                        energies += [dict(trial_id=tid, kind=kind, energy=float(k + i)) for k in range(3)]
    rows = energy_rows(pd.DataFrame(trials), pd.DataFrame(energies))
    bottom = rows[rows["panel"].str.contains("stitched")]
    assert list(dict.fromkeys(bottom["series"])) == ["from layer1.0", "from layer2.0", "from layer3.0"]
    assert set(rows["panel"]) == {"zoo:a: layer1.0", "zoo:a: stitched into layer1.0 (dm+tlm)"}
    top = rows[rows["panel"] == "zoo:a: layer1.0"]
    assert sorted(set(top["series"])) == ["layer1.0, in-distribution", "layer1.0, outliers (OOD)"] and len(top) == 6
    assert len(bottom) == 9  # three samples from each of the three front layers, no other trial's
    spec = energy_density_chart(rows).to_dict()
    assert spec["facet"]["row"]["field"] == "panel" and "x" not in spec.get("resolve", {}).get("scale", {})


def test_a_study_without_robustness_has_no_robust_accuracy_in_the_legend():
    from tests.analysis.report.test_write import study_trials

    spec = stitching_plot(study_trials(), "zoo:a", "zoo:b", "tlm").to_dict()
    domains = [m["encoding"]["color"]["scale"]["domain"] for m in spec["layer"]]
    assert domains and all(d == ["accuracy"] for d in domains)
    robust = stitching_plot(study_trials(robust=True), "zoo:a", "zoo:b", "tlm").to_dict()
    assert robust["layer"][0]["encoding"]["color"]["scale"]["domain"] == ["accuracy", "robust accuracy"]


def test_pairs_stitched_cross_layer_only_get_no_stitching_or_class_collapse_panel():
    from analysis.charts.stitching import class_collapse_grid
    from tests.analysis.report.test_write import study_trials

    trials = study_trials()  # zoo:a -> zoo:b same-layer, zoo:a -> zoo:c cross-layer only
    grid = stitching_grid(trials).to_dict()
    assert len(grid["vconcat"]) == 1 and grid["vconcat"][0]["hconcat"][0]["title"] == "zoo:a -> zoo:b (tlm)"
    collapse = class_collapse_grid(trials).to_dict()
    assert [p["title"] for row in collapse["vconcat"] for p in row["hconcat"]] == ["zoo:a -> zoo:b"]
    assert class_collapse_grid(study_trials(same_layer=False)).to_dict()["vconcat"] == []


def test_a_long_setting_wraps_the_panel_title_into_lines():
    t = _trials().assign(lr=0.01, donor_bn="frozen", weight_decay=5e-4)
    t.loc[t["seed"] == 1, ["lr", "donor_bn", "weight_decay", "seed"]] = [0.1, "update", 1e-3, 0]
    long = [s for s in setting_label(t).unique() if s.startswith("tlm") and len(s) > 40][0]
    title = stitching_plot(t, "zoo:r", "zoo:p", long).to_dict()["title"]
    assert isinstance(title, list) and len(title) > 1 and all(len(line) <= 60 for line in title)
    assert " ".join(title) == f"zoo:r -> zoo:p ({long})"
