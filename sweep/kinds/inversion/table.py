"""The inversion kind's results table `inversions`: its columns and what they hold."""

from __future__ import annotations

import pyarrow as pa

from sweep.store.units import unit_schema

TABLE = "inversions"
DESCRIPTIONS = {
    "momentum": "L2 momentum (Dong et al. 2018); 0: none",
    "dtype": "how the unit's inverted images are stored: float32, float16 or uint8 (1/255 steps)",
    "trial_id": "a stitched network's trial (null: a donor)",
    "eps": "the L2 bound around the seed image (pixels in [0, 1])",
    "seed": "the seed that draws the sample, the seed images and the noise",
    "images": "the test images the unit inverts (a fixed random sample)",
    "point": "the point whose representation is inverted (`penultimate`: the pooled vector)",
    "name": "the inversions entry's name in the search space",
    "batch_size": "images inverted at once (no effect on the result)",
}

# Representation inversion (Jones et al. 2022; Balogh & Jelasity 2023 Section 6): one part per unit (a donor and
# a sample of test images), one row per image.
SCHEMA = unit_schema(
    [
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
    ],
    DESCRIPTIONS,
)
