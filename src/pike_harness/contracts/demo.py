"""What ``pikeh demo`` runs, as plugins declare it: the host names no strategy, suite, LLM or evaluator.

A ``Demo`` is registered through the ``register_demos`` hook. ``pikeh demo`` runs the demo named
``default`` (or ``--demo NAME``); which registration of a name wins follows the one rule of the plugin
host (built-ins first, then third-party plugins by entry-point name, last wins), so a third-party
plugin that registers ``default`` replaces the built-in demo and ``pikeh plugins`` shows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_DEMO = "default"


@dataclass(frozen=True)
class Demo:
    """A complete small run: every choice ``pikeh run`` would need, plus the reporter for the report."""

    name: str
    strategy: str
    suite: str
    llm: str  # PROVIDER:MODEL
    evaluator: str
    tasks: str | None = None  # task ids within the suite ("1-3"); None: all
    reporter: str | None = None  # None: no report after the run
    strategy_options: Mapping[str, Any] = field(default_factory=dict)
    query_budget: int = 12
    llm_concurrency: int = 4
    # None: the host picks by device (the short "quick" protocol on a CPU, the default on a GPU).
    protocol: str | None = None
    description: str = ""

    def requirements(self) -> list[tuple[str, str]]:
        """(plugin kind, name) pairs that must be installed for this demo to run."""
        needs = [("strategies", self.strategy), ("suites", self.suite),
                 ("llm_backends", self.llm.partition(":")[0]), ("evaluators", self.evaluator)]
        return needs + ([("reporters", self.reporter)] if self.reporter else [])
