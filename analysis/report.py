"""`stitchsweep report`: an HTML page that works offline (Vega JavaScript inlined) plus PNG charts and CSVs."""

from __future__ import annotations

import html
import re
from pathlib import Path

import altair as alt
import pandas as pd

from .charts import class_collapse_grid, cross_task_grid, heatmap_grid, is_cross_task, setting_label, stitching_grid
from .load import load
from .stats import correlation_table, rank_correlations
from .storage import Loc, open_root
from .tables import layer_identification, long_matrices

TRIAL_COLUMNS = [
    "front",
    "end",
    "dataset",
    "front_point",
    "setting",
    "seed",
    "clean_acc",
    "relative_acc",
    "robust_acc",
    "most_frequent_class_ratio",
    "dm_residual",
    "time_fit_s",
    "time_total_s",
]
DONOR_COLUMNS = [
    "donor",
    "arch",
    "dataset",
    "training",
    "beta",
    "epochs",
    "train_size",
    "eval_dataset",
    "test_size",
    "clean_acc",
    "robust_acc",
    "n_eval_robust",
    "eps",
    "attack_iterations",
    "trained_now",
]


def _table(df: pd.DataFrame, columns: list[str]) -> str:
    cols = [c for c in columns if c in df.columns]
    return df[cols].to_html(index=False, float_format=lambda v: f"{v:.3f}", na_rep="", border=0)


def markdown_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (floats to 3 decimals)."""
    cells = [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row] for row in df.itertuples(index=False)]
    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in cells]) + "\n"


def _png(chart, path: Path) -> None:
    import vl_convert

    path.write_bytes(vl_convert.vegalite_to_png(chart.to_dict(), scale=1.5))


def write_report(results: str | Path | Loc, out: str | Path) -> Path:
    """Write into `out`: `index.html`; `stitching.png` (every same-task pair and setting) with one
    `stitching_<front>__<end>.png` per pair; `most_frequent_class.png` (seed 000 Fig. 4/6); `cross_task.png`
    (Fig. 8, when the sweep has cross-task pairs); `layer_matrices.png`/`.csv` (seed 004 Fig. 1-2, when
    layers were stitched across) and `layer_identification.csv`/`.md` (its Table 1); `trials.csv` and
    `donors.csv`. Returns the HTML path."""
    results, out = open_root(results), Path(out)  # results: a local folder or a pyarrow.fs URI
    out.mkdir(parents=True, exist_ok=True)
    tables = load(results)
    trials, donors, problems = tables["trials"], tables["donors"], tables["problems"]
    trials = trials.assign(setting=setting_label(trials))
    trials.to_csv(out / "trials.csv", index=False)
    donors.to_csv(out / "donors.csv", index=False)

    done = trials[trials["status"] == "done"]
    failed = trials[trials["status"] == "failed"]
    cross = is_cross_task(done)
    same_task, cross_task = done[~cross], done[cross]
    intro = [
        f"<h1>stitchsweep report: {html.escape(results.name)}</h1>",
        f"<p>{len(trials)} trials recorded: {len(done)} done, {len(failed)} failed."
        " Stitching plots: clean (blue) and robust (yellow) accuracy of the stitched network at each stitch"
        " point; bands span the two donors' accuracies. One row per donor pair, one column per setting"
        " (objective, alpha, beta, init, stitcher). Class collapse: the share of the most often predicted"
        " class (black line: 1/number of classes)."
        + (
            " Cross-task: donors trained on different datasets; 'on D' names the data the stitcher was"
            " trained and tested on; each band spans the donors' accuracies on their own tasks."
            if len(cross_task)
            else ""
        )
        + "</p>",
    ]
    sections = []
    if len(same_task):
        grid = stitching_grid(same_task)
        _png(grid, out / "stitching.png")
        sections.append(grid.properties(title="Stitching plots"))
        for pair in same_task[["front", "end"]].drop_duplicates().itertuples(index=False):
            one = stitching_grid(same_task[(same_task["front"] == pair.front) & (same_task["end"] == pair.end)])
            _png(one, out / (re.sub(r"[^A-Za-z0-9_.-]+", "_", f"stitching_{pair.front}__{pair.end}") + ".png"))
    if len(done):
        collapse = class_collapse_grid(done)
        _png(collapse, out / "most_frequent_class.png")
        sections.append(collapse.properties(title="Class collapse: most frequent class ratio"))
    if len(cross_task):
        ct = cross_task_grid(cross_task)
        _png(ct, out / "cross_task.png")
        sections.append(ct.properties(title="Cross-task stitching"))
    long = long_matrices(done) if len(done) else pd.DataFrame()
    identification = layer_identification(done) if len(done) else pd.DataFrame()
    if len(long) and long.groupby(["front", "end", "measure", "front_point"])["end_point"].nunique().max() > 1:
        long.to_csv(out / "layer_matrices.csv", index=False)
        heat = heatmap_grid(long)
        _png(heat, out / "layer_matrices.png")
        sections.append(heat.properties(title="Layer-by-layer matrices (rows: front layer, columns: end layer)"))
    if len(identification):
        identification.to_csv(out / "layer_identification.csv", index=False)
        (out / "layer_identification.md").write_text(markdown_table(identification))

    rest = []
    reptests = tables["reptests"]
    if len(reptests):
        per_unit = rank_correlations(reptests)
        per_unit.to_csv(out / "rank_correlations_per_unit.csv", index=False)
        corr = correlation_table(per_unit)
        corr.to_csv(out / "rank_correlations.csv", index=False)
        (out / "rank_correlations.md").write_text(markdown_table(corr))
        rest.append(
            "<h2>Rank-correlation tests (seed 004 Tables 2-3)</h2><p>Kendall's tau and Spearman's rho"
            " between the probing gap |F(A) - F(B)| and each dissimilarity d(A, B), mean over units;"
            " <i>significant</i>: units with both one-sided p-values below 0.05.</p>" + _table(corr, list(corr.columns))
        )
    if len(problems):
        problems.to_csv(out / "problems.csv", index=False)
        rest.append(
            "<h2>Unreadable results parts</h2><p>Skipped: these files could not be read as results"
            " (rerun <code>stitchsweep resume</code> to recompute their trials).</p>"
            + _table(problems, ["path", "kind", "error"])
        )
    if len(identification):
        rest.append(
            "<h2>Layer identification (seed 004 Table 1)</h2><p>Share of front layers whose most"
            " similar end layer, by each measure, is the corresponding one (intra: a donor with itself;"
            " inter: two donors of one architecture).</p>" + _table(identification, list(identification.columns))
        )
    rest.append("<h2>Donors</h2>" + _table(donors, DONOR_COLUMNS))
    if len(failed):
        rest.append(
            "<h2>Failed trials</h2>" + _table(failed, ["trial_id", "front", "end", "front_point", "setting", "error"])
        )
    rest.append("<h2>Trials</h2>" + _table(done.sort_values(["front", "end", "setting", "point_index"]), TRIAL_COLUMNS))
    marker = '<div class="vega-visualization" id="vis"></div>'
    if sections:
        chart_html = alt.vconcat(*sections, spacing=40).resolve_scale(color="independent").to_html(inline=True)
        page = chart_html.replace(marker, "".join(intro) + "<h2>Charts</h2>" + marker + "\n".join(rest), 1)
    else:
        page = (
            "<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>"
            + "".join(intro)
            + "<p>No finished trials to plot yet.</p>"
            + "\n".join(rest)
            + "</body></html>"
        )
    index = out / "index.html"
    index.write_text(page)
    return index
