"""Smith & Marcu 2024's plots and tables from hand-made trial and donor rows: the aggregates are checked
against values worked out by hand."""

import pandas as pd
import pytest

from analysis.charts import senders


def _trial(tid, front_dataset, end_dataset, point, index, acc, rank, rank_end, noise=None, end="zoo:d0"):
    return dict(
        trial_id=tid, status="done", front_dataset=front_dataset, end_dataset=end_dataset, dataset="corr",
        front_point=point, point_index=index, clean_acc=acc, end_clean_acc=0.5, rank_receiver=rank,
        receiver_acc=0.9 if end == "zoo:d0" else 0.6,
        rank_receiver_end=rank_end, noise_sigma=noise, end=end, num_classes=10, test_size=100,
    )  # fmt: skip


TRIALS = pd.DataFrame(
    [
        _trial("a", "colour", "digit", "p1", 1, 0.95, 10, 20),
        _trial("b", "colour", "digit", "p1", 1, 0.99, 14, 22),  # a second initialisation
        _trial("c", "colour", "digit", "p2", 2, 0.97, 30, 40),
        _trial("d", "corr", "digit", "p1", 1, 0.98, 12, 20),
        _trial("e", "corr", "digit", "p1", 1, 0.5, 12, 20, noise=0.1),  # a noise sender: sender 'noise'
        _trial("f", "digit", "colour", "p1", 1, 0.7, 8, 9, end="zoo:c0"),
    ]
)
DONORS = pd.DataFrame(
    [
        dict(donor="d0", ref="zoo:d0", arch="r18", dataset="digit", eval_dataset="digit", status="done",
             clean_acc=0.98, num_classes=10, training="plain"),
        dict(donor="d0", ref="zoo:d0", arch="r18", dataset="digit", eval_dataset="corr", status="done",
             clean_acc=0.9, num_classes=None, training="plain"),
        dict(donor="c0", ref="zoo:c0", arch="r18", dataset="colour", eval_dataset="colour", status="done",
             clean_acc=1.0, num_classes=10, training="plain"),
        dict(donor="c0", ref="zoo:c0", arch="r18", dataset="colour", eval_dataset="corr", status="done",
             clean_acc=0.6, num_classes=None, training="plain"),
    ]
)  # fmt: skip


def test_accuracy_by_point_has_min_max_bands_over_runs_and_the_whole_receiver():
    rows = senders.by_point(TRIALS, DONORS).set_index(["receiver", "sender", "front_point"])
    row = rows.loc[("digit", "colour", "p1")]
    assert (row["acc"], row["acc_min"], row["acc_max"], row["runs"]) == (pytest.approx(0.97), 0.95, 0.99, 2)
    assert rows.loc[("digit", "noise", "p1"), "acc"] == 0.5  # the noise sender is its own type
    whole = rows.loc[("digit", "colour", senders.WHOLE)]
    assert whole["acc"] == 0.98 and whole["point_index"] == 0  # the receiver on its own test set, first
    chart = senders.accuracy_chart(senders.by_point(TRIALS, DONORS)).to_dict()
    assert chart["facet"]["column"]["field"] == "arch" and chart["facet"]["row"]["field"] == "receiver"
    assert len(chart["spec"]["layer"]) == 3


def test_ranks_have_std_bands_and_the_receivers_own_baseline():
    rows = senders.ranks(TRIALS, DONORS).set_index(["receiver", "sender", "front_point"])
    row = rows.loc[("digit", "colour", "p1")]
    assert row["rank"] == 12 and row["rank_std"] == pytest.approx(2**0.5 * 2)  # sample std of 10 and 14
    assert row["lo"] == pytest.approx(12 - 2 * 2**0.5)
    baseline = rows.loc[("digit", "baseline", "p1")]
    assert baseline["rank"] == pytest.approx((20 + 22 + 20 + 20) / 4)  # every digit-receiver trial at p1


def test_first_point_table_puts_senders_in_rows_receivers_in_columns_with_base_accuracy():
    table = senders.first_point_table(TRIALS, DONORS)
    assert "noise" not in set(table["sender"]) and set(table["stitched_on"]) == {"corr"}  # noise: its own table
    table = table.set_index("sender")
    assert table.loc["colour", "receiver digit"] == pytest.approx(0.97)  # p1 only: a and b
    assert table.loc["digit", "receiver colour"] == 0.7
    assert table.loc["digit", "base_acc"] == 0.9 and table.loc["colour", "base_acc"] == 0.6  # on the stitching data
    (noise,) = senders.first_point_table(TRIALS, DONORS, noise=True).to_dict("records")
    assert noise["sender"] == "noise" and noise["receiver digit"] == 0.5 and noise["base_acc"] == 0.9
    # compatible: at or above the receiver's baseline on the same images (Section 2); 0.97 >= digit's 0.9
    assert table.loc["colour", "compatible digit"] and table.loc["digit", "compatible colour"]  # 0.7 >= 0.6
    assert pd.isna(table.loc["colour", "compatible colour"])  # no colour -> colour stitch
    below = pd.concat([TRIALS, pd.DataFrame([_trial("h", "corr", "colour", "p1", 1, 0.55, 8, 9, end="zoo:c0")])])
    flags = senders.first_point_table(below, DONORS).set_index("sender")
    assert not flags.loc["corr", "compatible colour"] and flags.loc["corr", "compatible digit"]  # 0.55 < 0.6
    assert noise["compatible digit"] is False  # the noise row: 0.5 below the digit receiver's 0.9
    own = senders.own_accuracy_table(TRIALS, DONORS).set_index("model")
    assert own.loc["digit", "acc"] == 0.98 and own.loc["colour", "initialisations"] == 1


def test_sections_stay_empty_without_receiver_ranks():
    plain = TRIALS.drop(columns=["rank_receiver"])
    assert senders.by_point(plain, DONORS).empty and senders.own_accuracy_table(plain, DONORS).empty


def test_section_4_2_is_its_own_block_and_compares_with_the_receiver_on_its_own_test_set():
    """Colour-only data into a greyscale receiver, the stitch on the sender's data (`data: front`): the receiver on
    those images is at chance (0.1 of 10 classes), so the baseline is its own test-set accuracy (the paper's
    0.990), `end_clean_acc`, and the rows form their own block of Table C1."""
    own_data = dict(_trial("g", "colour_only", "rgb", "p1", 1, 1.0, 5, 6), dataset="colour_only", stitch_data="front")
    own_data.update(receiver_acc=0.1, end_clean_acc=0.99)
    trials = pd.concat([TRIALS, pd.DataFrame([own_data])], ignore_index=True)
    rows = senders.by_point(trials, DONORS).set_index(["receiver", "sender", "front_point"])
    assert rows.loc[("rgb", "colour_only", "p1"), "baseline"] == 0.99
    assert rows.loc[("digit", "colour", "p1"), "baseline"] == pytest.approx(0.9)  # elsewhere: on the trial's images
    table = senders.first_point_table(trials, DONORS).set_index(["stitched_on", "sender"])
    assert table.loc[("colour_only", "colour_only"), "receiver rgb"] == 1.0
    assert pd.isna(table.loc[("corr", "colour"), "receiver rgb"])  # not mixed into the Correlated block


def test_a_table_c1_receiver_at_chance_on_the_stitching_images_keeps_that_baseline():
    """The swap to the receiver's own test set is Section 4.2's (the stitch on the sender's data): in Table C1's
    Correlated block a receiver at chance on the Correlated images (here colour, 0.1 of 10 classes) keeps its
    accuracy on those images as the baseline, so a stitch that does not beat its own test-set accuracy (0.5 <
    1.0) still counts as compatible (0.5 >= 0.1), as Smith & Marcu 2024 Section 2's rule reads."""
    at_chance = dict(_trial("h", "digit", "colour", "p1", 1, 0.5, 8, 9, end="zoo:c0"), stitch_data="sweep")
    at_chance.update(receiver_acc=0.1, end_clean_acc=1.0)
    trials = pd.concat([TRIALS.drop(index=5), pd.DataFrame([at_chance])], ignore_index=True)
    rows = senders.by_point(trials, DONORS).set_index(["receiver", "sender", "front_point"])
    assert rows.loc[("colour", "digit", "p1"), "baseline"] == pytest.approx(0.1)
    table = senders.first_point_table(trials, DONORS).set_index("sender")
    assert table.loc["digit", "compatible colour"]


def test_noise_initialisations_separate_the_stitchers_and_the_noise_datasets_spread():
    """C.2's investigation: trials of noise senders with their own seed, one receiver and point. Stitcher seeds
    0-2 on noise seed 0 (0.4, 0.8, 0.6) and noise seeds 0-2 on stitcher seed 0 (0.4, 0.5, 0.7); an unseeded
    noise trial is not among them, and the seeded ones stay out of the sender figures."""

    def run(tid, seed, noise_seed, acc):
        row = _trial(tid, "corr", "digit", "p1", 1, acc, 10, 20, noise=0.1)
        return dict(row, seed=seed, noise_seed=noise_seed)

    trials = pd.DataFrame(
        [run("s0", 0, 0, 0.4), run("s1", 1, 0, 0.8), run("s2", 2, 0, 0.6), run("n1", 0, 1, 0.5),
         run("n2", 0, 2, 0.7), run("plain", 0, None, 0.99)]
    )  # fmt: skip
    table = senders.noise_initialisations(trials).set_index("varied")
    inits, noise = table.loc["stitcher initialisation"], table.loc["noise dataset"]
    assert inits["runs"] == 3 and (inits["min_acc"], inits["max_acc"]) == (0.4, 0.8)
    assert inits["mean_acc"] == pytest.approx(0.6)
    assert noise["runs"] == 3 and (noise["min_acc"], noise["max_acc"]) == (0.4, 0.7)
    assert noise["mean_acc"] == pytest.approx((0.4 + 0.5 + 0.7) / 3)
    points = senders.by_point(trials, DONORS)
    at_p1 = points[(points["sender"] == "noise") & (points["front_point"] == "p1")]
    assert len(at_p1) == 1 and at_p1["runs"].iloc[0] == 1 and at_p1["acc_max"].iloc[0] == 0.99  # the unseeded
