"""The tsne kind's results table `tsne`: its columns and what they hold."""

from __future__ import annotations

import pyarrow as pa

from sweep.store.units import unit_schema

TABLE = "tsne"
DESCRIPTIONS = {
    "point_index": "the point's position among the unit's points, input to output",
    "images": "the test images embedded (a fixed random sample)",
    "image": "the image's index among the test images",
    "label": "the image's label",
    "seed": "the seed that draws the sample and t-SNE's random state",
    "name": "the tsne entry's name in the search space",
    "point": "the point whose activations are embedded",
}

# t-SNE maps (Balogh & Jelasity 2023 Fig. 7): one part per unit (a donor), one row per (point, image).
SCHEMA = unit_schema(
    [
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
    ],
    DESCRIPTIONS,
)
