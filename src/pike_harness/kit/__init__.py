"""The strategy kit: what PIKE-style strategies share (prompt templates, failure reports, reply parsing,
prompt recognition, evaluation rounds), offered to plugins through ``pike_harness.api``.
"""
