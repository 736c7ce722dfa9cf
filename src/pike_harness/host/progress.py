"""The live view of a run: a rich table per task on a terminal, plain log lines elsewhere.

Purely informative: nothing here is needed to resume or report a run.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.console import Console
from rich.live import Live
from rich.table import Table

from pike_harness.contracts.model import COMPILE_ERROR, CORRECT, INCORRECT, REJECTED, RUNTIME_ERROR, TIMEOUT
from pike_harness.host import terminal
from pike_harness.worker import text_safety

# The live table's count columns: (header, categories counted). Narrow, so the table fits 80 columns.
COUNT_COLUMNS = (("ok", (CORRECT,)), ("wrong", (INCORRECT,)), ("err", (COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT)),
                 ("rej", (REJECTED,)), ("llm", ("llm_error",)))


def queries_text(used: int, budget: int, *, short: bool = False) -> str:
    """Queries against the budget; a strategy's permitted overshoot is shown as such: 12/12 +3 past the
    budget (``short``: 12/12 +3, for tables that explain the +N below)."""
    if used > budget:
        return f"{budget}/{budget} +{used - budget}" + ("" if short else " past the budget")
    return f"{used}/{budget}"


@dataclass
class TaskProgress:
    ref: str
    query_limit: int
    phase: str = "waiting"
    note: str = ""
    queries_used: int = 0
    spend_usd: float = 0.0
    spend_known: bool = True
    best_speedup: float | None = None
    baseline_ms: float | None = None
    counts: Counter[str] = field(default_factory=Counter)
    done: bool = False


class RunProgress:
    """Collects per-task state from many threads and renders it."""

    def __init__(self, title: str, task_refs: list[str], query_limit: int, *, live: bool | None = None,
                 console: Console | None = None):
        self.title = title
        self.console = console or terminal.console(stderr=True)
        self.live_enabled = self.console.is_terminal if live is None else live
        self.tasks = {ref: TaskProgress(ref, query_limit) for ref in task_refs}
        self._lock = threading.Lock()
        self._live: Live | None = None
        self._started = time.monotonic()

    def __enter__(self) -> RunProgress:
        if self.live_enabled:
            self._live = Live(self._table(), console=self.console, refresh_per_second=2, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.update(self._table())
            self._live.__exit__(*exc)
            self._live = None

    def update(self, ref: str, **fields: Any) -> None:
        with self._lock:
            state = self.tasks[ref]
            for name, value in fields.items():
                setattr(state, name, value)
        self._refresh()

    def attempt_done(self, ref: str, line: str, category: str, *, queries_used: int, spend_usd: float,
                     spend_known: bool, best_speedup: float | None) -> None:
        with self._lock:
            state = self.tasks[ref]
            state.counts[category] += 1
            state.queries_used = queries_used
            state.spend_usd = spend_usd
            state.spend_known = spend_known
            state.best_speedup = best_speedup
        if self._live is None:
            self.message(line)
        self._refresh()

    def message(self, line: str) -> None:
        """A log line: above the live table on a terminal, plain on stderr otherwise; never a terminal
        command (a strategy's line may quote an LLM's answer or a candidate's output)."""
        line = text_safety.printable(line)
        if self._live is not None:
            self._live.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=sys.stderr, flush=True)

    def _refresh(self) -> None:
        if self._live is not None:
            with self._lock:
                table = self._table()
            self._live.update(table)

    def _table(self) -> Table:
        elapsed = time.monotonic() - self._started
        table = Table(title=f"{self.title}  ({elapsed / 60:.1f} min)", expand=False, box=box.SIMPLE_HEAD,
                      title_justify="left", pad_edge=False, collapse_padding=True)
        table.add_column("task", justify="left", overflow="ellipsis", max_width=15, no_wrap=True)
        table.add_column("phase", justify="left", overflow="ellipsis", max_width=12, no_wrap=True)
        states = list(self.tasks.values())
        # Columns that would be empty everywhere are left out, so the usual table fits 80 columns.
        show_spend = any(s.spend_usd or not s.spend_known for s in states)
        counts = [(name, cats) for name, cats in COUNT_COLUMNS
                  if name in ("ok", "wrong", "err") or any(s.counts.get(c) for s in states for c in cats)]
        for column in ("queries", "best", *(["spend"] if show_spend else []), *(name for name, _ in counts)):
            table.add_column(column, justify="right", no_wrap=True)
        for state in states:
            best = f"{state.best_speedup:.2f}x" if state.best_speedup else "-"
            spend = [f"${state.spend_usd:.2f}" if state.spend_known else "?"] if show_spend else []
            phase = "done" if state.done else f"{state.phase} {state.note}".strip()
            queries = queries_text(state.queries_used, state.query_limit, short=True).replace(" +", "+")
            cells = [str(sum(state.counts.get(c, 0) for c in cats) or "") for _, cats in counts]
            table.add_row(state.ref, terminal.literal(text_safety.printable(phase)), queries, best, *spend, *cells)
        return table
