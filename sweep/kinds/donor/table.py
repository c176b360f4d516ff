"""The donors' results table `donors`: one part per evaluation of a donor, one row."""

from __future__ import annotations

import pyarrow as pa

from sweep.store.units import described

TABLE = "donors"
DESCRIPTIONS = {
    "clean_acc": "the donor's clean accuracy on this evaluation's images: share of the test images classified"
    " correctly, in [0, 1]",
    "robust_acc": "the donor's robust accuracy on this evaluation's first n_eval_robust images",
    "eps": "this evaluation's robust-accuracy radius, pixels in [0, 1]",
    "epochs": "zoo donors: training epochs",
    "beta": "trades training: weight of the KL term",
    "seed": "zoo donors: the training seed",
    "train_size": "zoo donors: training images",
    "test_size": "this evaluation's test images",
    "dataset": "the data the donor trained on",
    "freeze": "zoo donors: layer freezing, 'point@epoch' (after that epoch the point and every stage"
    " before it stop training), comma-separated; null: none",
}

SCHEMA = described(
    [
        ("donor", pa.string()),  # the name in the search space, e.g. "plain_a"
        ("ref", pa.string()),  # "zoo:plain_a"
        ("donor_key", pa.string()),  # hash of the training config: names the cached checkpoint
        ("sweep", pa.string()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("arch", pa.string()),
        ("dataset", pa.string()),
        ("training", pa.string()),  # "plain" | "pgd" | "trades" | "file" | "robustbench"
        ("epochs", pa.int32()),
        ("beta", pa.float64()),  # trades
        ("adv_fraction", pa.float64()),  # pgd
        ("train_eps", pa.float64()),  # adversarial training: the budget, in its threat model's units
        ("train_size", pa.int64()),
        ("seed", pa.int64()),
        ("freeze", pa.string()),  # layer freezing: "point@epoch, ..." (null: none)
        ("clean_acc", pa.float64()),
        ("robust_acc", pa.float64()),
        ("n_eval_robust", pa.int32()),
        ("eps", pa.float64()),
        # the donor's own evaluation only: the same on its first training images (Cianfarani et al. 2022 Table 1)
        ("train_clean_acc", pa.float64()),
        ("train_robust_acc", pa.float64()),
        ("num_classes", pa.int32()),  # the donor's own evaluation: classes of its test data
        ("at_chance", pa.bool_()),  # ... and whether its accuracy there is no better than chance (analysis.donors)
        # the evaluation the accuracies come from: a donor has one row per evaluation the sweep uses (its own
        # test set, and each trial's test images and attack settings); a trial reads only an exact match
        ("eval_id", pa.string()),
        ("eval_dataset", pa.string()),
        ("test_size", pa.int64()),
        ("attack", pa.string()),
        ("attack_iterations", pa.int32()),
        ("attack_restarts", pa.int32()),
        ("trained_now", pa.bool_()),  # False when the checkpoint came from the cache
        ("time_train_s", pa.float64()),
        ("time_eval_s", pa.float64()),
        ("stitchsweep_version", pa.string()),
        ("schema_version", pa.int32()),
        ("finished_at", pa.timestamp("us", tz="UTC")),
    ],
    DESCRIPTIONS,
)
