"""The schemas of the measuring kinds of work (similarity, training similarity, inversions) and of donors'
training curves: one part per unit, columns every unit records first and last. `schema.py` collects them."""

from __future__ import annotations

import pyarrow as pa

# Similarity without stitching (Cianfarani et al. 2022): one part per unit, one row per (A point, B point).
# Columns every unit of a measuring kind (similarity, training similarity) records first, and last.
_UNIT_HEAD = [
    ("unit_id", pa.string()),
    ("sweep", pa.string()),
    ("name", pa.string()),
    ("status", pa.string()),
    ("error", pa.string()),
    ("dataset", pa.string()),
]
_UNIT_TAIL = [
    ("seed", pa.int64()),
    ("time_unit_s", pa.float64()),
    ("device", pa.string()),
    ("stitchsweep_version", pa.string()),
    ("schema_version", pa.int32()),
    ("finished_at", pa.timestamp("us", tz="UTC")),
]
_MINIBATCH = [("images", pa.int32()), ("batch_size", pa.int32()), ("passes", pa.int32())]
_ATTACK = [
    ("attack_norm", pa.string()),
    ("attack_eps", pa.float64()),
    ("attack_steps", pa.int32()),
    ("attack_step_size", pa.float64()),
]

SIMILARITY_SCHEMA = pa.schema(
    _UNIT_HEAD
    + [
        ("a", pa.string()),  # the donors' references, e.g. "zoo:plain_a"
        ("b", pa.string()),
        ("a_key", pa.string()),
        ("b_key", pa.string()),
        ("a_arch", pa.string()),
        ("b_arch", pa.string()),
        ("a_inputs", pa.string()),  # what each side saw: "benign" | "adversarial"
        ("b_inputs", pa.string()),
        ("a_point", pa.string()),
        ("b_point", pa.string()),
        ("a_index", pa.int32()),  # the point's position among the unit's points of that side, input to output
        ("b_index", pa.int32()),
        ("cka", pa.float64()),
        ("estimator", pa.string()),  # "minibatch" (unbiased HSIC, Nguyen et al. 2021) | "full"
    ]
    + _MINIBATCH
    + [("attack_source", pa.string())]  # the adversarial examples: crafted against this donor
    + _ATTACK
    + [
        ("a_acc", pa.float64()),  # each side's accuracy on the inputs it saw (b_acc on a's adversarial
        ("b_acc", pa.float64()),  # examples: Cianfarani et al. Fig. 5a's transfer robustness)
        ("measure", pa.string()),  # "cka" | "saliency" (one row: no points) | "opd" | "svcca"
        ("inversion_id", pa.string()),  # the inversion unit whose images both sides saw
        ("inverted", pa.string()),
        ("saliency_cosine", pa.float64()),
        ("saliency_cosine_std", pa.float64()),
        ("opd", pa.float64()),  # measure "opd": the orthogonal Procrustes distance of the pair, in [0, 2]
        ("svcca", pa.float64()),  # measure "svcca": the mean canonical correlation of the 99%-variance reductions
        ("svcca_max_k", pa.int32()),  # measure "svcca": the directions each side keeps at most (the protocol)
        ("svcca_k_a", pa.int32()),  # the directions side A kept (its null depends on them and on `images`)
        ("svcca_k_b", pa.int32()),
        ("time_measure_s", pa.float64()),  # seconds of this pair's measure on the held activations (B.1)
    ]
    + _UNIT_TAIL
)


# A trained donor's curves, one part per donor: per epoch its training loss and its validation loss and
# accuracy, benign and (adversarial methods) on the method's own attack: `val_adv_loss`, `val_adv_acc`.
DONOR_CURVES_SCHEMA = pa.schema(
    [
        ("donor", pa.string()),
        ("donor_key", pa.string()),
        ("training", pa.string()),
        ("epoch", pa.int32()),
        ("metric", pa.string()),
        ("value", pa.float64()),
    ]
)


# CKA across training epochs (Cianfarani et al. 2022 Figs 6, 25): one part per unit (a donor), one row per
# (point, epoch, epoch).
TRAINING_SIMILARITY_SCHEMA = pa.schema(
    _UNIT_HEAD
    + [
        ("donor", pa.string()),
        ("donor_key", pa.string()),
        ("arch", pa.string()),
        ("inputs", pa.string()),  # "benign" | "adversarial" (crafted against the donor's final epoch)
        ("point", pa.string()),
        ("point_index", pa.int32()),
        ("epoch_a", pa.int32()),
        ("epoch_b", pa.int32()),
        ("final_epoch", pa.int32()),
        ("cka", pa.float64()),
    ]
    + _MINIBATCH
    + _ATTACK
    + _UNIT_TAIL
)


# Representation inversion (Jones et al. 2022; Balogh & Jelasity 2023 Section 6): one part per unit (a donor and
# a sample of test images), one row per image.
INVERSION_SCHEMA = pa.schema(
    _UNIT_HEAD
    + [
        ("donor", pa.string()),
        ("donor_key", pa.string()),
        ("arch", pa.string()),
        ("point", pa.string()),
        ("recipe", pa.string()),
        ("start", pa.string()),
        ("steps", pa.int32()),
        ("step_size", pa.float64()),
        ("momentum", pa.float64()),
        ("eps", pa.float64()),
        ("images", pa.int32()),
        ("batch_size", pa.int32()),
        ("dtype", pa.string()),  # how its inverted images are stored: float32, float16 or uint8
        ("trial_id", pa.string()),  # a stitched network: the trial whose stitcher it uses
        ("stitcher_refitted", pa.bool_()),  # its stitcher was fitted again (the trial kept none)
        ("position", pa.int32()),
        ("image", pa.int64()),
        ("label", pa.int32()),
        ("seed_image", pa.int64()),
        ("seed_label", pa.int32()),
        ("loss", pa.float64()),
        ("loss_start", pa.float64()),
        ("best_step", pa.int32()),
        ("dist_seed", pa.float64()),
        ("dist_target", pa.float64()),
        ("pred", pa.int32()),
        ("pred_target", pa.int32()),
    ]
    + _UNIT_TAIL
)


# t-SNE maps (Balogh & Jelasity 2023 Fig. 7): one part per unit (a donor), one row per (point, image).
TSNE_SCHEMA = pa.schema(
    _UNIT_HEAD
    + [
        ("donor", pa.string()),
        ("donor_key", pa.string()),
        ("arch", pa.string()),
        ("point", pa.string()),
        ("point_index", pa.int32()),
        ("images", pa.int32()),
        ("perplexity", pa.float64()),
        ("image", pa.int64()),
        ("label", pa.int32()),
        ("x", pa.float64()),
        ("y", pa.float64()),
        ("kl_divergence", pa.float64()),
    ]
    + _UNIT_TAIL
)


# Pictures a report draws (`examples` section): one part per unit, one row per picture, placed in a grid by
# (panel, row, column); pixels are 8-bit, channels x height x width, row-major.
EXAMPLES_SCHEMA = pa.schema(
    _UNIT_HEAD
    + [
        ("show", pa.string()),
        ("donor", pa.string()),
        ("donor_key", pa.string()),
        ("arch", pa.string()),
        ("point", pa.string()),
        ("sender", pa.string()),
        ("position", pa.int32()),
        ("panel", pa.string()),
        ("row", pa.string()),
        ("column", pa.int32()),
        ("label", pa.int32()),
        ("pred", pa.int32()),
        ("image", pa.int64()),
        ("threat", pa.string()),
        ("eps", pa.float64()),
        ("scale", pa.float64()),
        ("channels", pa.int32()),
        ("height", pa.int32()),
        ("width", pa.int32()),
        ("pixels", pa.binary()),
    ]
    + _UNIT_TAIL
)


# Per-sample OOD energies of a trial with `ood` (Balogh & Jelasity 2025 Fig. 1c): one part per trial, one row per
# image and kind: "target" g<=j(x), "stitched" T(f<=i(x)), "outlier" (the outlier set through g<=j).
ENERGIES_SCHEMA = pa.schema(
    [
        ("trial_id", pa.string()),
        ("sweep", pa.string()),
        ("kind", pa.string()),
        ("energy", pa.float64()),
    ]
)
