"""The hooks a pike-harness plugin can implement: the project's plugin contract.

Every hook is a register-callback: the host calls it once per plugin with a ``register`` function,
and the plugin calls ``register(...)`` once for each thing it provides. The host records which plugin
registered what, so ``pikeh plugins`` can show it and name clashes follow one visible rule (see
docs/plugins.md). Plugins are found through the entry-point group ``pike_harness``; built-in features
use the same group. Import heavy packages (SDKs, duckdb, ray) inside the objects you register, not at
module level: every ``pikeh`` invocation imports every plugin module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("pike_harness")
hookimpl = pluggy.HookimplMarker("pike_harness")

Register = Callable[..., None]


@hookspec
def register_suites(register: Register) -> None:
    """Provide task suites. Call ``register(suite)`` with a ``pike_harness.tasks.Suite`` per suite.

    Called when the CLI builds its task catalogue. A suite's ``name`` is what users type in
    ``--suite`` and ``SUITE/ID``. Build suites cheaply (``Suite.from_dir``): task files are only
    parsed when a command needs them.
    """


@hookspec
def register_strategies(register: Register) -> None:
    """Provide search strategies. Call ``register(cls)`` with a ``pike_harness.strategy.Strategy``
    subclass; its ``name`` attribute is what ``pikeh run --strategy`` takes.

    The host owns budgets, persistence, resume, concurrency and progress; a strategy only decides
    what to ask the LLM and what to evaluate (see docs/strategies.md).
    """


@hookspec
def register_llm_backends(register: Register) -> None:
    """Provide LLM providers. Call ``register(provider, factory)`` per provider name.

    ``factory(model: str, options: pike_harness.llm.BackendOptions)`` returns a
    ``pike_harness.llm.LLMBackend``; users select it as ``PROVIDER:MODEL``. A backend makes one attempt
    per call; the host adds retries, concurrency limits, costing and caching.
    """


@hookspec
def register_evaluators(register: Register) -> None:
    """Provide evaluators. Call ``register(spec)`` with a ``pike_harness.evaluation.EvaluatorSpec``.

    The spec names the evaluator (``--evaluator NAME``), lists its extra click options (they are
    added to ``pikeh eval`` and ``pikeh run``) and holds a factory that builds the evaluator.
    """


@hookspec
def register_reporters(register: Register) -> None:
    """Provide reporters. Call ``register(cls)`` with a ``pike_harness.reporting.Reporter`` subclass;
    its ``name`` attribute is what ``pikeh report --reporter`` takes.
    """


@hookspec
def register_commands(cli: Any) -> None:
    """Add commands to the ``pikeh`` CLI. ``cli`` is the root ``click.Group``: call ``cli.add_command``.

    Called once at CLI start-up. A command name that already exists is refused with a warning; the
    built-in commands cannot be replaced.
    """
