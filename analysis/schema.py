"""The Parquet schemas of a results directory: the one place both the engine and the readers take them from.

Columns are only ever added (never renamed or retyped); readers cast every part to these schemas, so a part
written before a column existed reads back with nulls there instead of losing the column.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 2  # 2: trial and donor identities changed (see docs: a results folder of version 1 reruns)

TRIALS_DIR = "trials"
DONORS_DIR = "donors"
CURVES_DIR = "curves"
SPACE_FILE = "space.yaml"

TRIAL_SCHEMA = pa.schema(
    [
        ("trial_id", pa.string()),
        ("sweep", pa.string()),
        ("status", pa.string()),  # "done" | "failed"
        ("error", pa.string()),
        # configuration (the scientific fields of the TrialSpec)
        ("dataset", pa.string()),
        ("front", pa.string()),
        ("end", pa.string()),
        ("front_key", pa.string()),
        ("end_key", pa.string()),
        ("front_point", pa.string()),
        ("end_point", pa.string()),
        ("point_index", pa.int32()),
        ("n_points", pa.int32()),
        ("end_index", pa.int32()),  # the end point's position among the end model's stitch points
        ("n_end_points", pa.int32()),
        ("objective", pa.string()),
        ("alpha", pa.float64()),
        ("seed", pa.int64()),
        ("epochs", pa.int32()),
        ("lr", pa.float64()),
        ("batch_size", pa.int32()),
        ("dm_samples", pa.int32()),
        ("init", pa.string()),
        ("donor_bn", pa.string()),
        ("train_size", pa.int64()),
        ("val_size", pa.int64()),
        ("test_size", pa.int64()),
        ("split_id", pa.string()),
        ("attack", pa.string()),
        ("eps", pa.float64()),
        ("attack_iterations", pa.int32()),
        ("attack_restarts", pa.int32()),
        ("n_eval_robust", pa.int32()),
        ("precision", pa.string()),
        ("channels_last", pa.bool_()),
        ("beta", pa.float64()),  # trades
        ("adv_eps", pa.float64()),  # adversarial objectives: the PGD of the inner maximisation
        ("adv_step_size", pa.float64()),
        ("adv_steps", pa.int32()),
        ("adv_random_start", pa.bool_()),
        ("stitcher", pa.string()),  # "affine" | "bn_affine_bn"
        ("optimizer", pa.string()),  # the stitcher's optimiser (gradient objectives): "adam" | "sgd"
        ("weight_decay", pa.float64()),
        ("momentum", pa.float64()),  # sgd
        ("lr_schedule", pa.string()),  # "step" | "constant"
        ("indices", pa.string()),  # the similarity indices requested, "+"-joined
        ("similarity_samples", pa.int32()),
        ("pwcca_layout", pa.string()),  # how PWCCA / OPD saw the activations: "positions" | "pooled" | "flatten"
        ("opd_layout", pa.string()),
        ("ood_outliers", pa.string()),  # the OOD detector's outlier sets, "+"-joined
        ("ood_train_size", pa.int32()),
        ("ood_epochs", pa.int32()),
        ("ood_oe_epochs", pa.int32()),
        ("ood_samples", pa.int32()),
        ("front_dataset", pa.string()),  # the donors' training data (differ in cross-task stitching)
        ("end_dataset", pa.string()),
        ("stitch_data", pa.string()),  # whose data trained and tests the stitcher: "sweep" | "front" | "end"
        # metrics
        ("clean_acc", pa.float64()),
        ("robust_acc", pa.float64()),
        ("relative_acc", pa.float64()),  # clean_acc / the clean accuracy of the donor trained on `dataset`
        ("most_frequent_class", pa.int32()),
        ("most_frequent_class_ratio", pa.float64()),
        ("num_classes", pa.int32()),  # of the test data: 1/num_classes is the ratio of an unbiased classifier
        ("final_train_loss", pa.float64()),
        ("dm_residual", pa.float64()),
        # similarity of f<=i and g<=j on the first similarity_samples test images (sweep/similarity.py)
        ("sim_cka", pa.float64()),
        ("sim_pwcca", pa.float64()),
        ("sim_opd", pa.float64()),
        ("sim_dm", pa.float64()),  # the K-image DM stitcher's squared relative error on the test images
        ("rank_front", pa.int32()),  # numerical rank of the channel covariance (seed 003 B.2.1)
        ("rank_end", pa.int32()),
        # seed 003 B.2.1: rank of the receiver's first layer after the stitch, on stitched activations, and the
        # unstitched end model's at the same layer on the same images
        ("rank_receiver", pa.int32()),
        ("rank_receiver_end", pa.int32()),
        ("ood_auroc", pa.float64()),  # energy-detector AUROC, target vs stitched activations (0.5: in-distribution)
        ("front_clean_acc", pa.float64()),
        ("front_robust_acc", pa.float64()),
        ("end_clean_acc", pa.float64()),
        ("end_robust_acc", pa.float64()),
        # timings (seconds) and provenance
        ("time_setup_s", pa.float64()),
        ("time_fit_s", pa.float64()),
        ("time_eval_clean_s", pa.float64()),
        ("time_eval_robust_s", pa.float64()),
        ("time_similarity_s", pa.float64()),
        ("time_ood_s", pa.float64()),
        ("time_total_s", pa.float64()),
        ("device", pa.string()),
        ("hostname", pa.string()),
        ("torch_version", pa.string()),
        ("stitchsweep_version", pa.string()),
        ("schema_version", pa.int32()),
        ("finished_at", pa.timestamp("us", tz="UTC")),
    ]
)

DONOR_SCHEMA = pa.schema(
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
        ("train_size", pa.int64()),
        ("seed", pa.int64()),
        ("clean_acc", pa.float64()),
        ("robust_acc", pa.float64()),
        ("n_eval_robust", pa.int32()),
        ("eps", pa.float64()),
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
    ]
)

REPTESTS_DIR = "reptests"

# Representation tests (seed 004 Section 5): one part per unit, one row per member B of its set S.
REPTEST_SCHEMA = pa.schema(
    [
        ("unit_id", pa.string()),
        ("sweep", pa.string()),
        ("name", pa.string()),
        ("test", pa.string()),  # "sensitivity" | "specificity"
        ("status", pa.string()),
        ("error", pa.string()),
        ("arch", pa.string()),
        ("dataset", pa.string()),
        ("donor", pa.string()),
        ("donor_key", pa.string()),
        ("layer", pa.string()),
        ("rank", pa.int32()),  # null: full rank
        ("probe_acc", pa.float64()),  # F(B): linear probing accuracy on the test sample
        ("reference", pa.bool_()),  # B is A = argmax F
        ("ref_donor", pa.string()),
        ("ref_layer", pa.string()),
        ("ref_rank", pa.int32()),
        ("probe_gap", pa.float64()),  # |F(A) - F(B)|
        ("d_cka", pa.float64()),  # 1 - linear CKA(A, B)
        ("d_pwcca", pa.float64()),  # 1 - PWCCA(A, B)
        ("d_opd", pa.float64()),
        ("d_dm", pa.float64()),  # structural DM distance from B to A
        ("d_dm_func", pa.float64()),  # 1 - relative accuracy of B stitched into A's network by DM
        ("dm_func_acc", pa.float64()),
        ("samples", pa.int32()),
        ("probe_train_size", pa.int32()),
        ("time_unit_s", pa.float64()),
        ("stitchsweep_version", pa.string()),
        ("schema_version", pa.int32()),
        ("finished_at", pa.timestamp("us", tz="UTC")),
    ]
)

CURVE_SCHEMA = pa.schema(
    [
        ("trial_id", pa.string()),
        ("epoch", pa.int32()),
        ("metric", pa.string()),
        ("value", pa.float64()),
    ]
)

SCHEMAS = {TRIALS_DIR: TRIAL_SCHEMA, DONORS_DIR: DONOR_SCHEMA, CURVES_DIR: CURVE_SCHEMA, REPTESTS_DIR: REPTEST_SCHEMA}
