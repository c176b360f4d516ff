"""The report folder of a study without robustness (`n_eval_robust: 0`: no robust accuracy in any trial) whose
pairs are stitched same-layer or cross-layer only, from trials made by hand: a chart with nothing to draw is
left out rather than written as an empty image, and a long section title is wrapped into lines."""

from __future__ import annotations

import json
import re

import pandas as pd

from analysis.charts.stitching import setting_label
from analysis.report.data import ReportData
from sweep.store.results import write_rows
from sweep.store.schema import trial_schema

POINTS = ["layer1.0", "layer2.0", "layer3.0"]


def study_trials(same_layer: bool = True, cross_layer: bool = True, robust: bool = False) -> pd.DataFrame:
    """Done trials of TLM, two seeds: zoo:a -> zoo:b at every point to the same point (`same_layer`), zoo:a ->
    zoo:c from every point to every other point (`cross_layer`); robust accuracies only where `robust`."""
    rows = []
    pairs = [("zoo:b", True)] * same_layer + [("zoo:c", False)] * cross_layer
    for end, same in pairs:
        for i, front_point in enumerate(POINTS, start=1):
            for j, end_point in enumerate(POINTS, start=1):
                if (front_point == end_point) != same:
                    continue
                for seed in (0, 1):
                    rows.append(
                        dict(
                            trial_id=f"{end}:{front_point}>{end_point}:{seed}",
                            status="done",
                            front="zoo:a",
                            end=end,
                            dataset="fashion_mnist",
                            front_point=front_point,
                            end_point=end_point,
                            point_index=i,
                            end_index=j,
                            objective="tlm",
                            seed=seed,
                            clean_acc=0.5 + 0.1 * i,
                            robust_acc=0.1 * i if robust else None,
                            most_frequent_class_ratio=0.1 + 0.05 * i,
                            sim_cka=0.2 + 0.1 * j,
                            num_classes=10,
                            front_clean_acc=0.9,
                            end_clean_acc=0.85,
                            front_robust_acc=0.3 if robust else None,
                            end_robust_acc=0.2 if robust else None,
                        )
                    )
    return pd.DataFrame(rows)


def report_of(trials: pd.DataFrame, donors: pd.DataFrame | None = None) -> ReportData:
    """The report's data of `trials` (and `donors`), every other table empty."""
    tables = {"trials": trials.assign(setting=setting_label(trials))}
    return ReportData("study", tables | ({"donors": donors} if donors is not None else {}))


def _write(tmp_path, trials: pd.DataFrame):
    from analysis.report.write import write_report

    results = tmp_path / "study"
    write_rows(results / "trials" / "hand.parquet", trials.to_dict("records"), trial_schema())
    index = write_report(results, tmp_path / "report")
    return index, {p.name for p in (tmp_path / "report").iterdir()}


def test_a_cross_layer_only_pair_gets_no_stitching_png_and_no_class_collapse_panel(tmp_path):
    index, files = _write(tmp_path, study_trials())
    assert "stitching_zoo_a__zoo_b.png" in files and "stitching.png" in files
    assert "stitching_zoo_a__zoo_c.png" not in files  # its trials belong to the layer matrices
    assert "layer_matrices.png" in files and "most_frequent_class.png" in files


def test_a_study_of_cross_layer_pairs_only_writes_no_stitching_or_class_collapse_chart(tmp_path):
    index, files = _write(tmp_path, study_trials(same_layer=False))
    assert not {f for f in files if f.startswith("stitching")}
    assert "most_frequent_class.png" not in files and "layer_matrices.png" in files
    page = index.read_text()
    assert "Class collapse" not in page and "Stitching plots" not in page


def test_the_page_of_a_study_without_robustness_names_no_robust_accuracy(tmp_path):
    index, _ = _write(tmp_path, study_trials())
    page = index.read_text()
    assert "robust (yellow)" not in page and "robust accuracy" not in page
    assert "donor_at_chance" not in page  # no donor at chance: neither the note nor the column
    intros = re.findall(r"<p>(.*?)</p>", page, flags=re.S)
    assert intros and not [p for p in intros if "`" in p]


def test_section_titles_on_the_page_are_wrapped_into_lines(tmp_path):
    index, _ = _write(tmp_path, study_trials())
    spec = json.loads(re.search(r"const spec = (\{.*\});\s*const embedOpt", index.read_text(), flags=re.S).group(1))
    titles = [c["title"] for c in spec["vconcat"]]
    stitching = [t for t in titles if isinstance(t, list) and t[0].startswith("Stitching plots")]
    assert len(stitching) == 1 and len(stitching[0]) > 1
    assert all(len(line) <= 100 for t in titles for line in ([t] if isinstance(t, str) else t))
