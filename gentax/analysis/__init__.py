"""Tables, figures and statistics of the study, built from a long-format success summary.

Entry points (``gentax.analysis.tables``: ``build_all``, ``build_one``, ``compute_tables``, ``analyse``)
and every definition: docs/tables.md; the registry of tables and figures: ``gentax.analysis.artifacts``.
"""
