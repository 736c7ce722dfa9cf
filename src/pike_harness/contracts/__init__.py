"""The contracts between the host and its plugins: hook specifications, the data model, and the interfaces
(evaluator, LLM backend, strategy, reporter, demo, configuration) with the journal's event types.

Nothing here runs anything; the host (``pike_harness.host``) and plugins both build against these.
"""
