"""The fake LLM server fixture pike-harness ships for plugin tests."""

from pike_harness.testing.fixtures import llm_server  # noqa: F401  (a fixture, used by name)
