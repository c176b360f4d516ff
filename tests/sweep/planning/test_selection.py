"""Selections in the space language's terms (`--only`, `--rerun`): field=glob pairs, ',' = and, several = or;
an unknown field is refused naming those that exist; `status --only` and `plan --only` count by them."""

import json

import pytest
import yaml

from sweep.cli import EXIT_INCOMPLETE, main
from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.planning.selection import select, with_donors
from sweep.store.aside import SET_ASIDE_DIR, set_aside_units
from sweep.store.results import SweepDir


def _trials(sweep, chosen) -> list:
    units = {t.trial_id: t for t in sweep.trials}
    return sorted((units[u].objective, units[u].front_point) for u in chosen["trial"])


def test_pairs_are_and_selections_are_or_and_values_are_globs(tiny_space):
    sweep = parse_space(tiny_space)
    assert _trials(sweep, select(sweep, ["objective=dm"])) == [("dm", "layer1.0"), ("dm", "layer3.1")]
    assert _trials(sweep, select(sweep, ["objective=dm,stitch_point=layer3.*"])) == [("dm", "layer3.1")]
    both = select(sweep, ["objective=dm,stitch_point=layer3.*", "objective=tlm,point=layer1.?"])
    assert _trials(sweep, both) == [("dm", "layer3.1"), ("tlm", "layer1.0")]
    assert not both["donor"]  # no donor has an objective
    assert _trials(sweep, select(sweep, ["kind=trial"])) == _trials(sweep, select(sweep, []))
    assert select(sweep, ["kind=donor"])["trial"] == set() and len(select(sweep, ["arch=resnet_*"])["donor"]) == 1
    assert len(select(sweep, ["seed=0"])["trial"]) == 4 and not select(sweep, ["seed=1"])["trial"]


def test_a_tuple_field_matches_when_one_item_does(tiny_space):
    tiny_space["stitching"]["indices"] = ["cka", "opd"]
    sweep = parse_space(tiny_space)
    assert len(select(sweep, ["indices=opd"])["trial"]) == 4 and len(select(sweep, ["indices=c?a"])["trial"]) == 4
    assert not select(sweep, ["indices=pwcca"])["trial"]
    with pytest.raises(SpecError, match="field=pattern pairs"):  # ',' separates pairs: 'opd' is no pair
        select(sweep, ["indices=cka,opd"])


def test_an_unknown_field_is_refused_naming_those_that_exist(tiny_space):
    sweep = parse_space(tiny_space)
    with pytest.raises(SpecError) as err:
        select(sweep, ["objectiv=dm"])
    assert str(err.value).startswith("--only: expected a field of this sweep's units (")
    assert "objective" in err.value.expected and "stitch_point" in err.value.expected
    assert err.value.found == "objectiv" and "did you mean objective?" in str(err.value)
    with pytest.raises(SpecError, match="^--rerun: expected field=pattern pairs"):
        select(sweep, ["dm"], "--rerun")


def test_a_selected_trial_brings_the_donors_it_reads(tiny_space):
    sweep = parse_space(tiny_space)
    chosen = with_donors(sweep, select(sweep, ["objective=dm"]))
    assert len(chosen["donor"]) == 1 and len(chosen["trial"]) == 2


def test_status_and_plan_count_by_the_selection(tiny_space, tmp_path, write_space, capsys):
    sweep = parse_space(tiny_space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    sweep_dir.space.write_text(yaml.safe_dump(tiny_space))
    results = str(tmp_path / sweep.name)
    assert main(["status", results, "--json", "--only", "objective=dm,stitch_point=layer1.*"]) == EXIT_INCOMPLETE
    kinds = json.loads(capsys.readouterr().out)["kinds"]
    assert set(kinds) == {"trial"} and kinds["trial"]["total"] == 1 and kinds["trial"]["pending"] == 1
    assert main(["status", results, "--only", "objectiv=dm"]) == 2
    assert "--only: expected a field" in capsys.readouterr().err
    assert main(["plan", str(write_space(tiny_space)), "--only", "objective=tlm", "--json"]) == 0
    kinds = json.loads(capsys.readouterr().out)["kinds"]
    assert kinds["trial"]["count"] == 2 and kinds["donor"]["count"] == 1  # and the donor they read


def test_set_aside_moves_the_selected_units_parts_and_keeps_them(tiny_space, tmp_path):
    sweep = parse_space(tiny_space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    for t in sweep.trials:
        sweep_dir.trial_part(t.trial_id).write_bytes(t.trial_id.encode())
    chosen = select(sweep, ["objective=dm"])
    folder, moved = set_aside_units(sweep, sweep_dir, chosen)
    assert moved == 2 and folder.parent.path == (sweep_dir.path / SET_ASIDE_DIR).path
    kept = {p.name: p.read_text() for p in (tmp_path / sweep.name / SET_ASIDE_DIR).glob("*/trials/*.parquet.kept")}
    assert kept == {f"{u}.parquet.kept": u for u in chosen["trial"]}  # moved, content intact, out of the glob
    left = {p.stem for p in (tmp_path / sweep.name / "trials").glob("*.parquet")}
    assert left == {t.trial_id for t in sweep.trials} - chosen["trial"]


def test_set_aside_takes_a_unit_out_of_a_compacted_file(tiny_space, tmp_path):
    """A rerun of a unit whose part was compacted: its rows are written aside as its part and the compacted
    file keeps the other units' rows only, so the unit is pending again and nothing else changes."""
    from analysis.reading import read_table
    from sweep.planning.planning import statuses
    from sweep.store.compact import compact
    from sweep.store.results import write_rows
    from sweep.store.schema import trial_schema

    sweep = parse_space(tiny_space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    for k, t in enumerate(sweep.trials):
        row = {"trial_id": t.trial_id, "status": "done", "seed": k}
        write_rows(sweep_dir.trial_part(t.trial_id), [row], trial_schema())
    compact(sweep_dir.path, ["trials"])
    assert len(list((tmp_path / sweep.name / "trials").glob("*.parquet"))) == 1  # every part in one file
    chosen = select(sweep, ["objective=dm"])
    _, moved = set_aside_units(sweep, sweep_dir, chosen)
    assert moved == 2
    kept = {p.name for p in (tmp_path / sweep.name / SET_ASIDE_DIR).glob("*/trials/*.parquet.kept")}
    assert kept == {f"{u}.parquet.kept" for u in chosen["trial"]}
    left = set(read_table(sweep_dir.path, "trials").to_pandas()["trial_id"])
    assert left == {t.trial_id for t in sweep.trials} - chosen["trial"]
    parts = {t.trial_id: sweep_dir.trial_part(t.trial_id) for t in sweep.trials}
    status = statuses(list(parts.values()))
    assert {u for u, p in parts.items() if status.get(p) == "done"} == left  # the rerun's units are pending
