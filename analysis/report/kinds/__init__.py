"""Each shipped kind of work's part of the report, one module per kind, named as the kind (`trial.py`,
`similarity.py`, ...): `sections()`, the kind's charts (`ChartSection`s; the kind's `Kind.report` names it,
"analysis.report.kinds.<kind>:sections"), and, where it has any, `tables()`, its tables (`TableSection`s). Each
section's `order` places it in the report among every kind's. A section reads its kind's rows as
`data.of("<kind>")`."""
