"""The driver's own writes on a full disk (`sweep.cli.commands.stops_on_disk_full`): the compaction, the status
manifest and the readers' snapshot at the end of a `resume`, and `compact`, end the command in one line naming
the folder and the bytes the write needed, with EXIT_DISK_FULL; run again with space freed, they finish. A
sweep whose every unit is recorded: no Ray starts."""

from __future__ import annotations

import pyarrow as pa
import pytest
import yaml

from sweep.cli import main
from sweep.cli.commands import EXIT_DISK_FULL
from sweep.config.space import parse_space
from sweep.planning.planning import STATUS_MANIFEST
from sweep.registry import KINDS
from sweep.store.layout import SNAPSHOT_DIR
from sweep.store.results import SweepDir, write_rows
from sweep.store.schema import schema


@pytest.fixture
def recorded(tiny_space, tmp_path, monkeypatch):
    """The tiny sweep with every unit recorded done (rows of a status and a key), over the compaction
    threshold of 2 files."""
    monkeypatch.setenv("STITCHSWEEP_COMPACT_ABOVE", "2")
    sweep = parse_space(tiny_space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create([k.table for k in KINDS.values() if k.schema is not None and k.units(sweep)])
    sweep_dir.space.write_text(yaml.safe_dump(tiny_space))
    for kind in KINDS.values():
        table = schema(kind.table) if kind.schema is not None else None
        for uid, unit in kind.units(sweep).items():
            key = {kind.key: uid} if table is not None and table.field(kind.key).type == pa.string() else {}
            for part in kind.parts(sweep_dir, unit):
                write_rows(part, [dict(key, status="done")], table)
    return sweep_dir


def _one_line(err: str, folder) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"stitchsweep: error: disk full: {folder}: expected room to write ")
    assert " bytes, found the disk full (No space left on device)" in lines[0]
    return lines[0]


@pytest.mark.parametrize("what", ["@compacted-", STATUS_MANIFEST, SNAPSHOT_DIR])
def test_the_end_of_a_resume_on_a_full_disk_stops_in_one_line_and_finishes_later(recorded, full_disk, capsys, what):
    full_disk(what)
    assert main(["resume", str(recorded.path)]) == EXIT_DISK_FULL
    folder = recorded.trials if what == "@compacted-" else recorded.path / SNAPSHOT_DIR if what == SNAPSHOT_DIR \
        else recorded.path  # fmt: skip
    line = _one_line(capsys.readouterr().err, folder)
    assert line.endswith(f"Free space there, then: stitchsweep resume {recorded.path}")
    assert not (recorded.path / "driver.lease").exists()  # released
    full_disk(None)
    assert main(["resume", str(recorded.path)]) == 0
    assert (recorded.path / STATUS_MANIFEST).exists() and (recorded.path / SNAPSHOT_DIR).exists()
    assert not [p for p in recorded.path.rglob(".tmp-*")]


def test_compact_on_a_full_disk_stops_in_one_line_and_finishes_later(recorded, full_disk, capsys):
    n = len(recorded.trials.files(".parquet"))
    full_disk("/trials/@compacted-")
    assert main(["compact", str(recorded.path)]) == EXIT_DISK_FULL
    line = _one_line(capsys.readouterr().err, recorded.trials)
    assert line.endswith(f"then: stitchsweep compact {recorded.path}")
    assert len(recorded.trials.files(".parquet")) == n  # every part still loose
    full_disk(None)
    assert main(["compact", str(recorded.path)]) == 0 and len(recorded.trials.files(".parquet")) == 1
