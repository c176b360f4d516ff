"""Cianfarani et al. 2022's grids of CKA maps: which network is each threat model's main budget."""

import pandas as pd

from analysis.charts.grids import main_budget_networks


def test_each_threat_model_keeps_a_main_network_when_its_maxima_fall_on_two_networks():
    """pgd_wide is compared with the four other threat models (four networks), pgd_deep with two of them but six
    networks (five L2 budgets): the threat models come first, so pgd_wide is the L-inf network."""
    training = pd.Series(
        {"pgd_wide": "pgd", "pgd_deep": "pgd", "jpeg": "adv_jpeg", "gabor": "adv_gabor", "snow": "adv_snow"}
        | {f"l2_{k}": "pgd_l2" for k in range(5)}
    )
    pairs = [("pgd_wide", b) for b in ("l2_0", "jpeg", "gabor", "snow")]
    pairs += [("pgd_deep", b) for b in ("l2_0", "l2_1", "l2_2", "l2_3", "l2_4", "jpeg")]
    cross = pd.DataFrame(pairs, columns=["a", "b"])
    assert main_budget_networks(cross, training) == {"pgd_wide", "l2_0", "jpeg", "gabor", "snow"}


def test_tied_networks_are_all_kept():
    training = pd.Series({"x": "pgd", "y": "pgd", "j": "adv_jpeg"})
    cross = pd.DataFrame([("x", "j"), ("y", "j")], columns=["a", "b"])
    assert main_budget_networks(cross, training) == {"x", "y", "j"}
