"""The examples kind's results table `examples`: its columns and what they hold."""

from __future__ import annotations

import pyarrow as pa

from sweep.store.units import unit_schema

TABLE = "examples"
DESCRIPTIONS = {
    "name": "the examples entry's name in the search space",
    "show": "what the unit draws: 'images', 'palette', 'noise' or 'attacks'",
    "dataset": "the dataset drawn from (noise: the receiver's)",
    "donor": "attacks: the attacked donor's reference; noise: the receiver's",
    "donor_key": "attacks: the attacked donor's key; noise: the receiver's (it names the samples)",
    "point": "noise: the receiver's point the sample is shaped for",
    "sender": "noise: the noise sender's reference",
    "seed": "images: the draw; noise: the trial seed the sample is drawn from; attacks: random starts",
    "position": "the unit's place among its entry's units (the report's row order)",
    "panel": "the report's panel the picture goes in",
    "row": "the picture's row in its panel (a label)",
    "column": "the picture's column in its row",
    "label": "the image's class (palette: the colour's index)",
    "pred": "attacks: the donor's prediction on the picture (an image or its attacked version)",
    "image": "the image's index among the test images",
    "threat": "attacks: the threat model",
    "eps": "attacks: the attack's budget (pixels in [0, 1])",
    "scale": "attacks: a perturbation picture is 0.5 + scale (x' - x)",
    "channels": "the picture's channels (1: grey, 3: RGB)",
    "height": "the picture's height in pixels",
    "width": "the picture's width in pixels",
    "pixels": "the picture's 8-bit values (value / 255 in [0, 1]), channels x height x width, row-major",
}

# Pictures a report draws (`examples` section): one part per unit, one row per picture, placed in a grid by
# (panel, row, column); pixels are 8-bit, channels x height x width, row-major.
SCHEMA = unit_schema(
    [
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
    ],
    DESCRIPTIONS,
)
