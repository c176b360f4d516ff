"""The stitching trials' results table `trials`: one part per trial, one row. Between its head and tail, the
columns of every index the catalogue holds now (`sweep.store.schema.index_columns`), so a registered index has
its columns without an edit here."""

from __future__ import annotations

import pyarrow as pa

from sweep.store.schema import index_columns

TABLE = "trials"

HEAD = [
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
    ("ood_detector", pa.string()),  # null: the small detector; "paper": ResNet-18 / ViT-Ti blocks
    ("front_dataset", pa.string()),  # the donors' training data (differ in cross-task stitching)
    ("end_dataset", pa.string()),
    ("stitch_data", pa.string()),  # whose data trained and tests the stitcher: "sweep" | "front" | "end"
    # a noise sender (Smith & Marcu 2024): the stitcher trains and is tested on clustered noise
    ("noise_sigma", pa.float64()),
    ("noise_train_per_class", pa.int64()),
    ("noise_test_per_class", pa.int64()),
    ("noise_seed", pa.int64()),  # the samples' own seed (null: the trial's seed drew them)
    ("params", pa.string()),  # the objective's own parameters, a JSON object (null: it declares none)
    ("mknn_k", pa.int32()),  # index "mknn": the neighbours per image, where set (null: 10)
    ("permutations", pa.int32()),  # the indices' permutation null: shuffles of the target's images (0: none)
    # metrics
    ("clean_acc", pa.float64()),
    ("robust_acc", pa.float64()),
    ("relative_acc", pa.float64()),  # clean_acc / the clean accuracy of the donor trained on `dataset`
    # the end network's own clean accuracy on this trial's test images (the receiver baseline of Smith & Marcu
    # 2024; measured with the receiver_rank index)
    ("receiver_acc", pa.float64()),
    ("most_frequent_class", pa.int32()),
    ("most_frequent_class_ratio", pa.float64()),
    ("num_classes", pa.int32()),  # of the test data: 1/num_classes is the ratio of an unbiased classifier
    ("final_train_loss", pa.float64()),
    ("dm_residual", pa.float64()),
    ("dm_condition", pa.float64()),  # of the DM fit's centred (standardised) source rows
    # agreement with the end network ("head") on the test images (Jones et al. 2022 4.5), by whether the front
    # network ("body") and the head agree on an image, and on the true label
    ("head_agreement", pa.float64()),
    ("agree_both_correct", pa.float64()),
    ("agree_both_wrong", pa.float64()),
    ("agree_disagree", pa.float64()),
    ("n_both_correct", pa.int64()),
    ("n_both_wrong", pa.int64()),
    ("n_disagree", pa.int64()),
]
# ... then the columns of every similarity index in the catalogue (`catalogue.py`), then:
TAIL = [
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


def schema() -> pa.Schema:
    """The trials table without descriptions (`sweep.store.schema.schema` adds them)."""
    return pa.schema(HEAD + index_columns("trial") + TAIL)
