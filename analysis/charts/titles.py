"""Chart titles that fit: a long title as several lines (Vega-Lite draws a list of strings as one line each), so
no title runs past its chart or the page."""

from __future__ import annotations

import textwrap

SECTION_WIDTH = 100  # characters of a section's title per line: about 650 px in Vega's 13 px bold
PANEL_WIDTH = 60  # of a panel's title, a panel being 300 px wide


def wrap_title(text: str, width: int = SECTION_WIDTH) -> str | list[str]:
    """`text` as it is when it has at most `width` characters, else its lines of at most `width` characters
    (a word longer than that keeps a line of its own), broken at spaces."""
    if len(text) <= width:
        return text
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)
