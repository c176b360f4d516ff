"""The report's tables: their introductions are HTML (no Markdown backticks) and say only what applies."""

import pandas as pd

from analysis.report.table_sections import table_sections
from tests.analysis.report.test_write import report_of, study_trials

TABLES = table_sections()
TRIALS = [s for s in TABLES if s.title == "Trials"][0]


def test_no_introduction_shows_markdown_backticks():
    data = report_of(study_trials(), pd.DataFrame({"ref": ["zoo:a"], "donor_key": ["a"], "at_chance": [True]}))
    intros = [s.intro_for(s.data(data)) if s is TRIALS else s.intro_for(pd.DataFrame()) for s in TABLES]
    assert [i for i in intros if "`" in i] == []


def test_the_trials_table_notes_donors_at_chance_only_where_there_is_one():
    trials = study_trials()
    assert "donor_at_chance" not in TRIALS.intro_for(TRIALS.data(report_of(trials)))
    chance = pd.DataFrame({"ref": ["zoo:c"], "donor_key": ["c"], "at_chance": [True]})
    rows = TRIALS.data(report_of(trials, chance))
    assert set(rows.loc[rows["end"] == "zoo:c", "donor_at_chance"]) == {"zoo:c"}
    assert "donor_at_chance" in TRIALS.intro_for(rows)
