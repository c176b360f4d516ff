"""Charts are checked through their Vega-Lite spec (`to_dict()`), not pixels."""

import pandas as pd

from analysis.charts import END_LABEL, FRONT_LABEL, stitching_data, stitching_grid, stitching_plot


def _trials() -> pd.DataFrame:
    rows = []
    for obj in ("tlm", "dm"):
        for i, point in enumerate(["layer1.0", "layer1.1", "layer2.0"], start=1):
            for seed in (0, 1):
                rows.append(dict(status="done", front="zoo:r", end="zoo:p", objective=obj, front_point=point,
                                 point_index=i, seed=seed, clean_acc=0.5 + 0.1 * i + 0.01 * seed,
                                 robust_acc=0.1 * i, end_clean_acc=0.9, end_robust_acc=0.0,
                                 front_clean_acc=0.8, front_robust_acc=0.4))
    rows.append(dict(status="failed", front="zoo:r", end="zoo:p", objective="tlm", front_point="layer2.0",
                     point_index=3, seed=5))
    return pd.DataFrame(rows)


def test_points_are_ordered_from_end_model_to_front_model_and_averaged_over_seeds():
    points, order = stitching_data(_trials(), "zoo:r", "zoo:p", "tlm")
    assert order == [END_LABEL, "layer1.0", "layer1.1", "layer2.0", FRONT_LABEL]
    acc = points[points["metric"] == "accuracy"].set_index("x")["value"]
    assert abs(acc["layer1.0"] - 0.605) < 1e-9  # mean of seeds 0 and 1; the failed trial is ignored
    assert acc[END_LABEL] == 0.9 and acc[FRONT_LABEL] == 0.8


def test_stitching_plot_has_donor_bands_and_sorted_axis():
    spec = stitching_plot(_trials(), "zoo:r", "zoo:p", "tlm").to_dict()
    band, line = spec["layer"]
    assert band["mark"]["type"] == "rect" and band["encoding"]["y2"]["field"] == "hi"
    assert line["encoding"]["x"]["sort"][0] == END_LABEL
    assert line["encoding"]["x"]["sort"][-1] == FRONT_LABEL
    bands = spec["datasets"][band["data"]["name"]]
    by_metric = {b["metric"]: (b["lo"], b["hi"]) for b in bands}
    assert by_metric == {"accuracy": (0.8, 0.9), "robust accuracy": (0.0, 0.4)}


def test_grid_has_a_row_per_pair_and_a_column_per_objective():
    spec = stitching_grid(_trials()).to_dict()
    assert len(spec["vconcat"]) == 1 and len(spec["vconcat"][0]["hconcat"]) == 2
