"""Tables, figures and statistics of the study, built from a long-format success summary.

Inputs and every definition: ``docs/tables.md``. Entry points:

- ``gentax.analysis.summary.load_summary`` / ``load_properties``: read and validate the inputs;
- ``gentax.analysis.tables.build_all``: write every table, statistic and figure to a folder
  (atomically); ``gentax tables`` is its command line (``gentax.analysis.cli``);
- ``gentax.analysis.tables.build_one``: one table or figure to given paths (workflow rules), computing
  only what that entry's builder reads;
- ``gentax.analysis.tables.compute_tables``: everything in memory; ``analyse``: the inputs, each
  table built on first use (``Analysis.table``);
- ``gentax.analysis.artifacts``: the registry of the tables and figures (one entry each).
"""
