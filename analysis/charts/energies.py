"""Balogh & Jelasity 2025 Fig. 1c: the energy scores of the OOD detector, from the `energies` table (per-sample
energies of target, stitched and outlier activations of the trials with `ood`)."""

from __future__ import annotations

import altair as alt
import pandas as pd


def energy_rows(trials: pd.DataFrame, energies: pd.DataFrame, objectives=("dm+tlm", "tlm")) -> pd.DataFrame:
    """Balogh & Jelasity 2025 Fig. 1c from the per-sample energies: one network stitched into itself (intra-network,
    the first donor in name order with such trials), into its first stitch point (the paper's "layer 1", our
    `layer1.0` on ResNet-18), with TLM (our `dm+tlm`, else `tlm`, else the first objective recorded). Top panel:
    that layer's own energies on in-distribution samples and on the outliers; bottom panel: the stitched
    energies into it from every front layer, in layer order. Columns: panel, series, order (legend order),
    energy; one energy scale for both panels."""
    if energies.empty or trials.empty:
        return pd.DataFrame()
    done = trials[(trials["status"] == "done") & trials["trial_id"].isin(energies["trial_id"])]
    done = done[done["front"] == done["end"]]
    if done.empty:
        return pd.DataFrame()
    done = done[done["end_index"] == done["end_index"].min()]
    recorded = sorted(set(done["objective"]))
    objective = next((o for o in objectives if o in recorded), recorded[0])
    done = done[done["objective"] == objective]
    donor = sorted(done["front"])[0]
    chosen = done[done["front"] == donor].sort_values(["point_index", "trial_id"]).drop_duplicates("point_index")
    end_point = chosen["end_point"].iloc[0]
    first = energies[energies["trial_id"] == chosen["trial_id"].iloc[0]]
    own = {"target": f"{end_point}, in-distribution", "outlier": f"{end_point}, outliers (OOD)"}
    top = first[first["kind"].isin(own)]
    parts = [
        top.assign(
            panel=f"{donor}: {end_point}",
            series=top["kind"].map(own),
            order=top["kind"].map({"target": 0, "outlier": 1}),
        )
    ]
    for k, (trial_id, point) in enumerate(zip(chosen["trial_id"], chosen["front_point"]), start=2):
        rows = energies[(energies["trial_id"] == trial_id) & (energies["kind"] == "stitched")]
        parts.append(
            rows.assign(panel=f"{donor}: stitched into {end_point} ({objective})", series=f"from {point}", order=k)
        )
    return pd.concat(parts, ignore_index=True)[["panel", "series", "order", "energy"]]


def energy_density_chart(rows: pd.DataFrame) -> alt.FacetChart:
    """Densities of energy scores (Balogh & Jelasity 2025 Fig. 1c): the end layer's own in-distribution and outlier
    energies on top, the stitched energies from every layer below, on one energy scale."""
    panels = list(dict.fromkeys(rows["panel"]))
    series = list(rows.sort_values("order")["series"].drop_duplicates())
    return (
        alt.Chart(rows[["panel", "series", "energy"]])
        .transform_density("energy", groupby=["panel", "series"], as_=["energy", "density"])
        .mark_area(opacity=0.4)
        .encode(
            x=alt.X("energy:Q", title="energy"),
            y=alt.Y("density:Q", title="density", stack=None),
            color=alt.Color("series:N", title=None, sort=series),
        )
        .properties(width=520, height=150)
        .facet(row=alt.Row("panel:N", title=None, sort=panels))
        .resolve_scale(y="independent")
    )
