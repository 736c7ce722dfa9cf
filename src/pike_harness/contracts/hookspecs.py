"""The hooks a pike-harness plugin can implement: the project's plugin contract.

Every hook is a register-callback: the host calls it once per plugin with a ``register`` function,
and the plugin calls ``register(...)`` once for each thing it provides. The host records which plugin
registered what, so ``pikeh plugins`` can show it and name clashes follow one visible rule (see
docs/plugins.md). Plugins are found through the entry-point group ``pike_harness``; built-in features
use the same group. Import heavy packages (SDKs, duckdb, ray) inside the objects you register, not at
module level: every ``pikeh`` invocation imports every plugin module.

Each hook's ``register`` has its own typed signature (``RegisterSuite``, ``RegisterLLMBackend``, ...),
so a plugin author's type checker knows what to pass, and the host checks every call against it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:  # the contract's types, without importing them at CLI start
    from pike_harness.contracts.demo import Demo
    from pike_harness.contracts.evaluation import EvaluatorSpec
    from pike_harness.contracts.llm import BackendFactory, ProviderPrices
    from pike_harness.contracts.reporting import Reporter
    from pike_harness.contracts.strategy import Strategy
    from pike_harness.contracts.suite import Suite

hookspec = pluggy.HookspecMarker("pike_harness")
hookimpl = pluggy.HookimplMarker("pike_harness")


# -- the ``register`` callback each hook receives: one typed signature per hook -------------------

class RegisterSuite(Protocol):
    def __call__(self, suite: Suite, /) -> None: ...


class RegisterStrategy(Protocol):
    def __call__(self, strategy: type[Strategy], /) -> None: ...


class RegisterLLMBackend(Protocol):
    def __call__(self, provider: str, factory: BackendFactory, /, *, prices: ProviderPrices | None = None) -> None: ...


class RegisterEvaluator(Protocol):
    def __call__(self, spec: EvaluatorSpec, /) -> None: ...


class RegisterReporter(Protocol):
    def __call__(self, reporter: type[Reporter], /) -> None: ...


class RegisterDemo(Protocol):
    def __call__(self, demo: Demo, /) -> None: ...


@hookspec
def register_suites(register: RegisterSuite) -> None:
    """Provide task suites. Call ``register(suite)`` with a ``pike_harness.contracts.suite.Suite`` per suite.

    Called when the CLI builds its task catalogue. A suite's ``name`` is what users type in
    ``--suite`` and ``SUITE/ID``. Build suites cheaply (``load_suite(path, origin=...)``): task files are only
    parsed when a command needs them.
    """


@hookspec
def register_strategies(register: RegisterStrategy) -> None:
    """Provide search strategies. Call ``register(cls)`` with a ``pike_harness.contracts.strategy.Strategy``
    subclass; its ``name`` attribute is what ``pikeh run --strategy`` takes.

    The host owns budgets, persistence, resume, concurrency and progress; a strategy only decides
    what to ask the LLM and what to evaluate (see docs/strategies.md).
    """


@hookspec
def register_llm_backends(register: RegisterLLMBackend) -> None:
    """Provide LLM providers. Call ``register(provider, factory, prices=...)`` per provider name.

    ``factory(model: str, options: pike_harness.contracts.llm.BackendOptions)`` returns a
    ``pike_harness.contracts.llm.LLMBackend``; users select it as ``PROVIDER:MODEL``. A backend makes one attempt
    per call; the host adds retries, concurrency limits, costing and caching. ``prices``
    (``pike_harness.contracts.llm.ProviderPrices``) gives the price files of the provider's models and says
    whether list prices apply (not for a server you host yourself); the host's price table knows no
    model of its own.
    """


@hookspec
def register_evaluators(register: RegisterEvaluator) -> None:
    """Provide evaluators. Call ``register(spec)`` with a ``pike_harness.contracts.evaluation.EvaluatorSpec``.

    The spec names the evaluator (``--evaluator NAME``), lists its extra click options (they are
    added to ``pikeh eval`` and ``pikeh run``) and holds a factory that builds the evaluator.
    """


@hookspec
def register_reporters(register: RegisterReporter) -> None:
    """Provide reporters. Call ``register(cls)`` with a ``pike_harness.contracts.reporting.Reporter`` subclass;
    its ``name`` attribute is what ``pikeh report --reporter`` takes.
    """


@hookspec
def register_demos(register: RegisterDemo) -> None:
    """Provide what ``pikeh demo`` runs. Call ``register(demo)`` with a ``pike_harness.contracts.demo.Demo``.

    A demo names its strategy, suite, LLM, evaluator and reporter (plugins' names) and their options.
    ``pikeh demo`` runs the one named ``default`` unless ``--demo NAME`` picks another; like every
    other name, ``default`` goes to the last registration (a third-party plugin replaces the built-in).
    """


@hookspec
def register_commands(cli: Any) -> None:
    """Add commands to the ``pikeh`` CLI. ``cli`` is the root ``click.Group``: call ``cli.add_command``.

    Called once at CLI start-up. A command name that already exists is refused with a warning; the
    built-in commands cannot be replaced.
    """
