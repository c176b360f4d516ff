"""Cianfarani et al. 2022 Fig. 6's loss curves averaged over seeds (`analysis.charts.curves`): donors sharing a recipe
but their seed are one group, averaged per loss and epoch (worked out by hand); accuracies are left out."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.charts.curves import mean_curves


def test_donors_of_one_recipe_are_averaged_and_other_recipes_kept_apart(tmp_path):
    from analysis.charts.curves import mean_curve_chart
    from analysis.report.write import _png

    recipe = dict(dataset="fashion_mnist", arch="resnet_tiny", epochs=2, freeze=None)
    donors = pd.DataFrame(
        [
            dict(donor_key="k0", training="pgd", train_eps=0.1, **recipe),
            dict(donor_key="k1", training="pgd", train_eps=0.1, **recipe),  # another seed
            dict(donor_key="k2", training="pgd", train_eps=0.2, **recipe),
        ]
    )
    values = {"k0": (1.0, 0.5, 0.9), "k1": (2.0, 1.5, 0.8), "k2": (4.0, 3.0, 0.7)}  # epoch 1, epoch 2 losses; acc
    curves = pd.DataFrame(
        [dict(donor_key=k, training="pgd", epoch=e, metric="train_loss", value=v[e - 1]) for k, v in values.items()
         for e in (1, 2)]
        + [dict(donor_key=k, training="pgd", epoch=1, metric="val_acc", value=v[2]) for k, v in values.items()]
    )  # fmt: skip
    m = mean_curves(curves, donors).set_index(["group", "epoch"])
    assert set(m["metric"]) == {"train_loss"}  # losses only
    pair = m.loc[("pgd eps 0.1 resnet_tiny (fashion_mnist)", 2)]
    assert pair["value"] == pytest.approx(1.0) and pair["donors"] == 2
    assert (pair["lo"], pair["hi"]) == (pytest.approx(0.5), pytest.approx(1.5))  # two donors: min and max
    assert m.loc[("pgd eps 0.2 resnet_tiny (fashion_mnist)", 1), "value"] == pytest.approx(4.0)
    _png(mean_curve_chart(m.reset_index()), tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 1000
