"""An inversion unit's images on disk (`sweep.store.inverted`): shards that are resume points, the dtype a
space chooses, targets and seeds kept as indices, readers that load only what they need, and results written
before shards still read."""

import io

import numpy as np
import pytest
import torch

import analysis
from analysis.charts import robustness
from sweep.config.errors import SpecError
from sweep.kinds.base import RunContext
from sweep.kinds.inversion import run as kind
from sweep.kinds.similarity.run import run_similarity
from sweep.store import inverted as stored
from sweep.store.results import SweepDir
from tests.sweep.kinds.test_inversion_jones import _parse, _test_images, zoo  # noqa: F401 (zoo: the fixture, two tiny donors)

CPU = torch.device("cpu")
INVERSION = {"name": "inv", "donors": ["zoo:plain_a"], "images": 10, "steps": 20}


class Killed(BaseException):
    """What a killed worker looks like to the unit: nothing after it runs (not an error the unit records)."""


def _unit(zoo, **options):  # noqa: F811
    (spec,) = _parse(zoo, inversions=dict(INVERSION, **options)).units["inversion"]
    return spec


def _fresh(zoo, tmp_path, name):  # noqa: F811
    """A sweep folder of its own that shares the module's zoo (the donors' checkpoints)."""
    d = SweepDir(zoo[1].root, f"{zoo[1].name}-{name}")
    d.create()
    for sub in ("donors",):
        for part in (zoo[1].path / sub).glob("*.parquet"):
            (d.path / sub / part.name).write_bytes(part.read_bytes())
    return d


@pytest.mark.slow  # the zoo fixture of tests/sweep/kinds/test_inversion_jones.py trains two donors
def test_a_killed_inversion_resumes_from_its_last_shard_and_ends_with_the_same_images(zoo, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setattr(stored, "SHARD", 4)  # 10 images: shards of 4, 4 and 2
    spec = _unit(zoo)
    whole = _fresh(zoo, tmp_path, "whole")
    assert kind.run_inversion(spec, RunContext(whole, CPU))["status"] == "done"

    calls, real = [], kind._invert

    def dies_on_the_second_shard(*args):
        calls.append(args[-1])
        if len(calls) == 2:
            raise Killed
        return real(*args)

    killed = _fresh(zoo, tmp_path, "killed")
    monkeypatch.setattr(kind, "_invert", dies_on_the_second_shard)
    with pytest.raises(Killed):
        kind.run_inversion(spec, RunContext(killed, CPU))
    assert stored.has_shard(killed.path, spec.unit_id, 0) and not stored.has_shard(killed.path, spec.unit_id, 1)
    assert not killed.part("inversions", spec.unit_id).exists()  # no part: the unit is not done

    calls.clear()
    monkeypatch.setattr(kind, "_invert", lambda *args: calls.append(args[-1]) or real(*args))
    assert kind.run_inversion(spec, RunContext(killed, CPU))["status"] == "done"
    assert calls == [4, 8]  # the offsets of the shards it had not written: the first was not inverted again
    # the same computation on the same machine: equal to float32 rounding
    np.testing.assert_allclose(stored.inverted(killed.path, spec.unit_id), stored.inverted(whole.path, spec.unit_id),
                               rtol=0, atol=1e-6)  # fmt: skip
    rows = {d: analysis.load(d.path)["inversions"].sort_values("position") for d in (whole, killed)}
    assert rows[whole]["pred"].tolist() == rows[killed]["pred"].tolist()
    np.testing.assert_allclose(rows[whole]["loss"], rows[killed]["loss"], rtol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("dtype,step", [("uint8", 0.5 / 255), ("float16", 2**-11)])
def test_the_space_chooses_how_the_images_are_stored_and_the_rows_read_them_as_stored(zoo, tmp_path, dtype, step):  # noqa: F811
    wide, narrow = _unit(zoo), _unit(zoo, dtype=dtype)
    assert narrow.unit_id != wide.unit_id and wide.dtype == "float32"
    d = _fresh(zoo, tmp_path, dtype)
    for spec in (wide, narrow):
        assert kind.run_inversion(spec, RunContext(d, CPU))["status"] == "done"
    raw = np.load(io.BytesIO(stored.shard(d.path, narrow.unit_id, 0).read_bytes()))["inverted"]
    assert raw.dtype == np.dtype(dtype)
    a, b = stored.inverted(d.path, wide.unit_id), stored.inverted(d.path, narrow.unit_id)
    # the same inversion, stored at another precision: within half a step of the type (images in [0, 1])
    assert 0 < np.abs(a - b).max() <= step * 1.001
    rows = analysis.load(d.path)["inversions"].set_index(["unit_id", "position"])["dtype"]
    assert set(rows.loc[narrow.unit_id]) == {dtype} and set(rows.loc[wide.unit_id]) == {"float32"}
    with pytest.raises(SpecError, match=r"inversions.dtype"):
        _unit(zoo, dtype="int8")


@pytest.mark.slow
def test_targets_and_seeds_are_indices_and_a_unit_on_natural_images_reads_no_shard(zoo, tmp_path):  # noqa: F811
    d = _fresh(zoo, tmp_path, "lazy")
    sweep = _parse(
        zoo,
        inversions=INVERSION,
        similarity={"inverted": "inv", "points": ["penultimate"], "estimator": "full",
                    "pairs": [{"a": "zoo:plain_a", "b": "zoo:plain_b"}]},
    )  # fmt: skip
    (spec,) = sweep.units["inversion"]
    assert kind.run_inversion(spec, RunContext(d, CPU))["status"] == "done"
    kept = stored.index(d.path, spec.unit_id)
    x = _test_images(spec)
    rows = analysis.load(d.path)["inversions"].sort_values("position")
    assert (
        kept["image"].tolist() == rows["image"].tolist() and kept["seed_image"].tolist() == rows["seed_image"].tolist()
    )
    # the 8-bit previews the report draws are the first targets and seeds of the dataset, to 8-bit rounding
    np.testing.assert_allclose(kept["preview_targets"], x[kept["image"][:8]].numpy(), atol=0.5 / 255 + 1e-6)
    np.testing.assert_allclose(kept["preview_seeds"], x[kept["seed_image"][:8]].numpy(), atol=0.5 / 255 + 1e-6)
    for k in range(-(-len(kept["image"]) // stored.SHARD)):  # without its shards, the benign unit still runs
        stored.shard(d.path, spec.unit_id, k).unlink()
    (unit,) = sweep.units["similarity"]
    assert run_similarity(unit, RunContext(d, CPU))["status"] == "done"
    with pytest.raises(FileNotFoundError):
        stored.inverted(d.path, spec.unit_id)


def test_results_written_before_shards_are_still_read(tmp_path):
    from sweep.store.storage import open_root

    root = open_root(tmp_path)
    images = np.random.default_rng(0).uniform(size=(3, 1, 4, 4)).astype(np.float32)
    buf = io.BytesIO()
    np.savez_compressed(buf, inverted=images, targets=images / 2, seeds=images / 3, image=np.array([5, 1, 7]))
    stored.legacy(root, "u1").write_bytes(buf.getvalue())
    assert stored.index(root, "u1")["image"].tolist() == [5, 1, 7]
    np.testing.assert_array_equal(stored.inverted(root, "u1"), images)
    inversions = analysis.load(tmp_path)["inversions"]
    assert inversions.empty  # no table here: the report's grid reads a unit named in the table
    import pandas as pd

    table = pd.DataFrame([dict(unit_id="u1", status="done", donor="d", point="p", recipe="jones", seed=0)])
    grid = robustness.inversion_images(tmp_path, table, per_unit=2)
    assert grid["row"].drop_duplicates().tolist() == ["targets", "seeds (jones, seed 0)", "d @p (jones)"]
    assert grid["url"].iloc[0] == robustness.png_url(images[0] / 2)


@pytest.mark.slow
def test_plan_says_what_the_inverted_images_take_and_refuses_a_folder_without_room(zoo, tmp_path, monkeypatch, capsys):  # noqa: F811
    import copy
    from types import SimpleNamespace

    import yaml

    from sweep.cli import EXIT_BAD_INPUT, main
    from sweep.planning import disk

    space = copy.deepcopy(zoo[0])
    del space["stitching"]
    space["inversions"] = dict(INVERSION, dtype="uint8")
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(space))
    assert main(["plan", str(path)]) == 0
    # 10 digits of 1 x 28 x 28 pixels, a byte each, with 32 bytes of losses and indices each (8,160 bytes), and
    # 3 x 8 previews of 784 bytes (18,816)
    assert "1 inversion units (28 px, uint8) write up to 27.0 kB each" in capsys.readouterr().out
    monkeypatch.setattr(disk.shutil, "disk_usage", lambda where: SimpleNamespace(free=1000))
    assert main(["plan", str(path), "--storage", str(tmp_path / "results")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "--storage" in err and "27.0 kB" in err and "1.0 kB free" in err
