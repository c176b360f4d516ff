"""A handle on a sweep's results, its status (`sweep.status`) and its report (`sweep.report`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sweep.api.inputs import check_results, open_results, open_storage
from sweep.api.planned import selection
from sweep.config.errors import SpecError


@dataclass(frozen=True)
class Results:
    """A handle on a sweep's results (`RESULTS/<sweep>`, a local folder or a URI)."""

    path: str

    def status(self, only=None) -> dict:
        """Its counts per kind of work (`sweep.status`)."""
        return status(self.path, only)

    @property
    def complete(self) -> bool:
        return bool(self.status()["complete"])

    def load(self, **kwargs) -> dict:
        """Every table, as `analysis.load` reads them (pandas frames by table name)."""
        from analysis import load

        return load(self.path, **kwargs)

    def report(self, out=None) -> Path:
        """Write the sweep's report into `out` (default `report/<sweep>`); returns its index page."""
        return report(self.path, out)


def report(results, out=None) -> Path:
    """Write the report of the sweep at `results` into `out` (default `report/<sweep>`): an empty folder or this
    sweep's previous report (else a SpecError naming `out`). Returns its index page."""
    from analysis.report.page import ReportFolderError
    from analysis.report.write import write_report
    from sweep.planning.status import status_json
    from sweep.registry import KINDS
    from sweep.store.layout import SPACE_FILE

    p = open_storage(results, "RESULTS")
    check_results(p, str(results), ("space.yaml", "trials"), RESULTS_EXPECTED)
    expected = None
    if (p / SPACE_FILE).exists():  # the header's counts and which trials are still in the space
        sweep, sweep_dir = open_results(results)
        doc = status_json(sweep, sweep_dir)
        kinds = {k: dict(v, blocked=len(v["blocked"])) for k, v in doc["kinds"].items()}
        expected = {"kinds": kinds, "trial_ids": list(KINDS["trial"].units(sweep))}
    folder = Path(out) if out else Path("report") / p.name
    try:
        return write_report(p, folder, expected)
    except ReportFolderError as exc:
        raise SpecError("--out", "an empty folder, or this sweep's previous report", str(folder), str(exc)) from None


RESULTS_EXPECTED = "a results directory with a space.yaml or a trials/ folder (made by `stitchsweep run`)"


def status(results, only=None) -> dict:
    """The sweep's counts per kind of work (done, failed with their errors, pending, blocked), as `stitchsweep
    status --json` prints them; `complete` is whether every unit is done."""
    from sweep.planning.status import status_json

    sweep, sweep_dir = open_results(results)
    return status_json(sweep, sweep_dir, selection(sweep, only))
