"""Analysis of stitchsweep results: Parquet -> pandas -> Altair charts and an HTML report.

Imports neither torch nor ray: results can be analysed anywhere pandas runs. The names below load their
modules (and pandas, Altair) on first use (PEP 562), so that `sweep.store`, which the sweep engine reads
while checking a space, costs no pandas import. No submodule shares a name with them.

The readers (`load`, `load_*`, `read_table`, `report_data`) first import the plugins the sweep kept (its
`space.yaml`'s `plugins:`), so that a plugin kind's table and a plugin index's columns are read; `plugins=` names
others, `plugins=False` none (`analysis.reading.import_plugins`).
"""

from __future__ import annotations

from sweep.store.exports import lazy_exports

_HOME = {
    **dict.fromkeys(
        ["load", "load_trials", "load_donors", "load_curves", "load_reptests", "load_similarity", "read_table"],
        "reading",
    ),
    **dict.fromkeys(["report_data", "figure", "figures", "table", "tables"], "report.notebook"),
}
__all__ = list(_HOME)


__getattr__, __dir__ = lazy_exports(__name__, _HOME, globals())
