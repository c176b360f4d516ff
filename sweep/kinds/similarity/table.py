"""The similarity kind's results table `similarity`: its columns and what they hold."""

from __future__ import annotations

import pyarrow as pa

from sweep.store.units import ATTACK, MINIBATCH, unit_schema

TABLE = "similarity"
DESCRIPTIONS = {}

SCHEMA = unit_schema(
    [
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
    + MINIBATCH
    + [("attack_source", pa.string())]  # the adversarial examples: crafted against this donor
    + ATTACK
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
        ("mknn_k", pa.int32()),  # measure "mknn": the neighbours per image, where set (null: 10)
        ("time_measure_s", pa.float64()),  # seconds of this pair's measure on the held activations (B.1)
    ],
    DESCRIPTIONS,
)
