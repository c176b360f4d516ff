"""The study's own stitching chart: a panel of accuracies per pair, the indices beside it."""

import pandas as pd

from analysis.charts.per_point import overlay_grid, same_layer


def _trials(indices: dict[str, list[float]]) -> pd.DataFrame:
    rows = pd.DataFrame(
        dict(status="done", front="zoo:a", end="zoo:b", front_point=list("pqrs"), end_point=list("pqrs"),
             point_index=[1, 2, 3, 4], seed=0, clean_acc=[0.2, 0.5, 0.6, 0.9], front_clean_acc=0.9,
             end_clean_acc=0.9, **indices)
    )  # fmt: skip
    return pd.concat([rows.assign(setting=s) for s in ("tlm lr=0.01", "tlm lr=0.1", "dm")], ignore_index=True)


def test_the_index_panels_title_of_several_indices_and_settings_is_wrapped_into_lines():
    values = [0.1, 0.3, 0.35, 0.8]
    spec = overlay_grid(_trials(dict(sim_cka=values, sim_pwcca=values, sim_opd=values[::-1]))).to_dict()
    _, index = spec["vconcat"][0]["hconcat"]
    assert isinstance(index["title"], list) and all(len(line) <= 60 for line in index["title"])
    assert " ".join(index["title"]).startswith("zoo:a -> zoo:b: cka: rho")
    one = overlay_grid(_trials(dict(sim_cka=values)).query("setting == 'dm'")).to_dict()
    assert one["vconcat"][0]["hconcat"][1]["title"] == "zoo:a -> zoo:b: cka: rho 1.00 (dm)"


def test_same_layer_keeps_the_done_trials_stitched_to_their_own_point():
    t = pd.DataFrame(
        dict(status=["done", "done", "failed", "done"], front_point=["p", "p", "p", "q"],
             end_point=["p", "q", "p", None])
    )  # fmt: skip
    assert same_layer(t).index.tolist() == [0, 3]  # no end point: recorded before cross-layer stitching


def test_cross_task_pairs_with_indices_are_drawn_and_correlated_as_the_same_task_pairs():
    """The objectives comparison's shortcut testbed stitches donors trained on two variants of one task (a
    cross-task pair to the report): its trials' indices are drawn beside the accuracies, and correlated with them
    in the table; cross-task pairs without indices keep a panel per setting."""
    from analysis.report.kinds.trial import TABLES, cross_task_drawing

    values = [0.1, 0.3, 0.35, 0.8]
    t = _trials(dict(sim_cka=values, sim_mknn=values[::-1])).assign(front_dataset="x_colour", end_dataset="x_digit")
    long = t.assign(setting=t["setting"] + " on x_colour train_size=400 val_size=50 test_size=100 opd_layout=pooled")
    spec = cross_task_drawing(long).to_dict()
    assert "(dm on x_colour)" in " ".join(spec["vconcat"][0]["hconcat"][1]["title"])  # no sizes, no layouts
    accuracy, index = spec["vconcat"][0]["hconcat"]
    assert "cka: rho 1.00" in " ".join(index["title"]) and "mutual k-nn: rho -1.00" in " ".join(index["title"])
    table = next(s for s in TABLES if s.title.startswith("Stitched accuracy against each index"))

    class Data:
        done = t

    rows = table.data(Data())
    assert set(rows["index"]) == {"cka", "mutual k-nn"} and len(rows) == 6  # 3 settings x 2 indices, 4 points each
    assert (rows["points"] == 4).all()
    no_index = _trials({}).assign(front_dataset="x_colour", end_dataset="x_digit")
    plain = cross_task_drawing(no_index.assign(robust_acc=None, front_robust_acc=None, end_robust_acc=None)).to_dict()
    titles = [panel["title"] for panel in plain["vconcat"][0]["hconcat"]]  # cross_task_grid: a panel per setting
    assert titles[-1] == "zoo:a (x_colour) -> zoo:b (x_digit) (tlm lr=0.1)" and len(titles) == 3
