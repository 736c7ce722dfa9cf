"""Which attempt is a task's final best: the one rule the run loop, its final re-timing and the run
summary apply (the DuckDB report's ``task_best`` view states the same rule in SQL).

The best is the fastest correct attempt among the counted queries within the budget (``within_budget``),
ties going to the earlier query. By default an attempt whose code contains ``torch.jit.trace`` never
wins, as in PIKE's analysis: a traced module replays the one path it saw while tracing, so its speed
says little about the program the LLM wrote. ``include_jit_trace`` (``--include-jit-trace``) lets
such attempts compete.
"""

from __future__ import annotations

from dataclasses import dataclass

from pike_harness.contracts.journal import within_budget

JIT_TRACE = "torch.jit.trace"


def uses_jit_trace(code: str | None) -> bool:
    """Whether ``code`` contains ``torch.jit.trace`` (a plain text test, as PIKE's analysis makes it)."""
    return code is not None and JIT_TRACE in code


@dataclass(frozen=True)
class Contender:
    """A correct attempt that may be the task's best."""

    key: str
    index: int
    runtime_ms: float
    code_sha256: str | None

    def beats(self, other: Contender | None) -> bool:
        """Faster wins; of two equally fast, the earlier query."""
        return other is None or (self.runtime_ms, self.index) < (other.runtime_ms, other.index)


def contender(*, key: str, index: int | None, category: str | None, runtime_ms: float | None, code: str | None,
              code_sha256: str | None, query_budget: int, include_jit_trace: bool) -> Contender | None:
    """The attempt as a contender for best, or None when the rule leaves it out."""
    if category != "correct" or runtime_ms is None or runtime_ms <= 0 or not within_budget(index, query_budget):
        return None
    if not include_jit_trace and uses_jit_trace(code):
        return None
    assert index is not None  # within_budget says so
    return Contender(key=key, index=index, runtime_ms=runtime_ms, code_sha256=code_sha256)
