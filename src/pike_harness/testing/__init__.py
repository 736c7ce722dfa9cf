"""Test helpers shipped for plugin authors (and used by pike-harness's own tests).

- ``ScriptedContext`` (pike_harness.testing.context): the ``TaskContext`` a strategy gets, scripted:
  answers by query, verdicts by key, budgets charged as the host charges them, futures that resolve
  out of order. Unit-test a strategy's search structure without a run loop.
- ``FakeLLMServer`` (pike_harness.testing.llm_server): an OpenAI- and Anthropic-compatible HTTP server
  on 127.0.0.1, so a backend or a whole run goes through the real SDKs (``--llm-base-url``). The
  pytest fixture ``llm_server`` is in pike_harness.testing.fixtures.
- ``FakeEvaluator`` and ``fake_evaluator_plugin`` (pike_harness.testing.evaluator): verdicts from a
  function, registered as ``--evaluator fake``, for fast end-to-end runs through the host's run loop.
- ``invoke`` (pike_harness.testing.cli): the ``pikeh`` CLI in-process with extra plugin objects;
  ``main_with_plugins`` the same as a process's entry point (a launcher a test runs as a subprocess).

docs/plugins.md ("Testing a plugin") shows them together; docs/examples/pikeh-example-plugin/tests
uses them.
"""

from __future__ import annotations

from pike_harness.testing.cli import invoke, main_with_plugins
from pike_harness.testing.context import (
    REFERENCE_SOURCE,
    Query,
    ScriptedContext,
    correct,
    failure,
    incorrect,
    make_task,
    program_for,
)
from pike_harness.testing.evaluator import FakeEvaluator, default_verdict, fake_evaluator_plugin
from pike_harness.testing.llm_server import FakeLLMServer, FakeReply, ReceivedRequest, mutate_reply

__all__ = [
    "REFERENCE_SOURCE",
    "FakeEvaluator",
    "FakeLLMServer",
    "FakeReply",
    "Query",
    "ReceivedRequest",
    "ScriptedContext",
    "correct",
    "default_verdict",
    "fake_evaluator_plugin",
    "failure",
    "incorrect",
    "invoke",
    "main_with_plugins",
    "make_task",
    "mutate_reply",
    "program_for",
]
