"""`stitchsweep report`: the tables prepared once (`data.py`: `ReportData`), the chart sections
(`sections.py`) and table sections (`table_sections.py`) drawn from them, the HTML page (`page.py`), the
report folder (`write.py`: `write_report`), a paper's report (`paper.py`) and the sections one at a time for
a notebook (`notebook.py`)."""
