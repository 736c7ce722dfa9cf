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

from rich.console import Console
from rich.live import Live
from rich.table import Table

from pike_harness.model import CATEGORIES


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
        self.console = console or Console(stderr=True)
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
        """A log line: above the live table on a terminal, plain on stderr otherwise."""
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
        table = Table(title=f"{self.title}  ({elapsed / 60:.1f} min)", expand=False)
        for column in ("task", "phase", "queries", "best", "spend", *CATEGORIES, "llm_error"):
            table.add_column(column.replace("_error", "_err"), justify="right" if column != "task" else "left")
        for state in self.tasks.values():
            best = f"{state.best_speedup:.2f}x" if state.best_speedup else "-"
            spend = f"${state.spend_usd:.2f}" if state.spend_known else "unknown"
            phase = "done" if state.done else f"{state.phase} {state.note}".strip()
            table.add_row(state.ref, phase, f"{state.queries_used}/{state.query_limit}", best, spend,
                          *[str(state.counts.get(c, 0) or "") for c in (*CATEGORIES, "llm_error")])
        return table
