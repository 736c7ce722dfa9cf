"""A scripted stand-in for the host's TaskContext, for unit tests of search structure.

It does what the real run loop promises a strategy, and nothing more: counted queries are charged
when they are issued (``BudgetExhausted`` past budget + overshoot), every key must be unique, answers
come from a script keyed by query, and evaluation verdicts from an outcome table keyed by query key.
Pending futures resolve together, in an order unlike submission order (reversed or shuffled), when
the strategy first reads a result, or after a short grace period for a strategy that waits with
``concurrent.futures.wait``/``as_completed``; a strategy that depended on completion order is caught.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pike_harness.api import (
    Attempt,
    BudgetExhausted,
    BudgetView,
    EvalResult,
    LLMResponse,
    Task,
    TaskMeta,
    Usage,
    code_fences,
    prompt_kinds,
)
from pike_harness.contracts.model import OutputCheck

GRACE_S = 0.05  # how long unread futures stay pending before they resolve on their own
SETTLE_AT_FALLBACK_S = 60.0  # with ``settle_at``: resolve anyway after this long, and count it (a test asserts none)

REFERENCE_SOURCE = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    """Scripted reference: scale then tanh (REFERENCE-MARKER)."""

    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.tanh(x * self.scale)


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return [2.0]
'''


def make_task(folder: Path, *, meta: TaskMeta | None = None) -> Task:
    path = folder / "7_ScaledTanh.py"
    path.write_text(REFERENCE_SOURCE, encoding="utf-8")
    return Task(suite="scripted", id=7, name="7_ScaledTanh", path=path, meta=meta or TaskMeta())


def program_for(key: str) -> str:
    """The program the scripted model writes for query ``key``: unique per key, so prompts that quote
    it can be traced back to the attempt it came from."""
    return f"import torch\n\n\nclass ModelNew(torch.nn.Module):\n    source_key = {key!r}\n"


def default_reply(query: Query) -> str | None:
    if query.role == "brainstorm":
        return "Ideas:\n" + "\n".join(f"- idea number {i}" for i in range(10))
    return f"Here is the program.\n\n```python\n{program_for(query.key)}```\n"


# -- verdicts -------------------------------------------------------------------------------------

def correct(runtime_ms: float) -> EvalResult:
    return EvalResult(request_id="r", task="scripted/7", category="correct", runtime_ms=runtime_ms)


def failure(category: str = "compile_error", **fields: Any) -> EvalResult:
    fields.setdefault("reason", f"scripted {category}")
    return EvalResult(request_id="r", task="scripted/7", category=category, **fields)


def incorrect(*diffs: float) -> EvalResult:
    outputs = [OutputCheck(input_set=0, index=i, max_abs_diff=d, ok=False) for i, d in enumerate(diffs)]
    return EvalResult(request_id="r", task="scripted/7", category="incorrect", reason="outputs differ",
                      outputs=outputs)


# -- the context ----------------------------------------------------------------------------------

@dataclass
class Query:
    """One query as the strategy issued it, with the budget it saw just before."""

    kind: str  # "ask" or "attempt"
    role: str
    key: str
    messages: list[dict[str, str]]
    counted: bool
    parent: str | None
    meta: dict[str, Any]
    used_before: int
    index: int | None

    @property
    def prompt(self) -> str:
        return self.messages[-1]["content"]

    @property
    def quoted(self) -> str | None:
        return prompt_kinds.quoted_program(self.messages)


@dataclass
class ScriptedContext:
    task: Task
    query_limit: int
    overshoot: int = 0
    outcomes: dict[str, EvalResult] = field(default_factory=dict)
    default_outcome: Callable[[str], EvalResult] = lambda key: failure("compile_error")
    reply: Callable[[Query], str | None] = default_reply
    completion: str = "reverse"  # order in which pending futures resolve: "reverse" or "shuffle"
    seed: int = 0
    refuse_after: int | None = None  # a hard wall below budget + overshoot (a money budget, say)
    settle_on_read: bool = True  # False: pending futures resolve only after the grace period
    grace_s: float = GRACE_S
    # Resolve every pending attempt once this many are pending, or once the query budget is spent (no
    # more can come). Unlike the grace timer it does not depend on how fast the strategy submits, so a
    # test of how many attempts are in flight cannot fail on a loaded machine. Reads do not settle.
    settle_at: int | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.queries: list[Query] = []
        self.attempts: dict[str, Attempt] = {}
        self.statuses: list[dict[str, Any]] = []
        self.logs: list[str] = []
        self.completed: list[str] = []
        self._used = 0
        self._pending: list[tuple[Future[Attempt], Attempt]] = []
        self._shuffler = random.Random(self.seed + 1)
        self._lock = threading.RLock()
        self._timer: threading.Timer | None = None
        self.max_pending = 0  # the most attempts in flight (submitted, not yet resolved) at once
        self.fallback_settles = 0  # with settle_at: settles that only the fallback timer brought

    # -- the TaskContext protocol ---------------------------------------------------------------
    @property
    def budget(self) -> BudgetView:
        return BudgetView(query_limit=self.query_limit, queries_used=self._used, money_limit_usd=None,
                          money_spent_usd=0.0)

    def ask(self, role: str, messages: list[dict[str, str]], *, key: str, counted: bool = True,
            params: Any = None) -> LLMResponse:
        query = self._issue("ask", role, messages, key, counted, None, {})
        return _response(self.reply(query) or "")

    def submit_attempt(self, role: str, messages: list[dict[str, str]], *, key: str,
                       parent: str | None = None, meta: dict[str, Any] | None = None,
                       counted: bool = True, params: Any = None) -> Future[Attempt]:
        query = self._issue("attempt", role, messages, key, counted, parent, dict(meta or {}))
        text = self.reply(query)
        attempt = Attempt(task=self.task.ref, key=key, role=role, index=query.index, parent=parent,
                          meta=dict(meta or {}))
        if text is None:
            attempt.llm_error = "scripted permanent LLM failure"
        else:
            attempt.response = _response(text)
            attempt.code = code_fences.extract_code(text)
            attempt.result = self.outcomes.get(key) or self.default_outcome(key)
        self.attempts[key] = attempt
        future = _Deferred(self)
        with self._lock:
            self._pending.append((future, attempt))
            self.max_pending = max(self.max_pending, len(self._pending))
            if self.settle_at is not None and (len(self._pending) >= self.settle_at
                                               or self._used >= self.query_limit):
                self._settle()
            elif self._timer is None:
                wait_s, action = ((self.grace_s, self._settle) if self.settle_at is None
                                  else (SETTLE_AT_FALLBACK_S, self._fallback_settle))
                self._timer = threading.Timer(wait_s, action)
                self._timer.daemon = True
                self._timer.start()
        return future

    def attempt(self, role: str, messages: list[dict[str, str]], **kwargs: Any) -> Attempt:
        return self.submit_attempt(role, messages, **kwargs).result()

    def evaluate(self, code: str, *, key: str) -> EvalResult:
        return self.outcomes.get(key) or self.default_outcome(key)

    def set_status(self, **fields: Any) -> None:
        self.statuses.append(fields)

    def log(self, message: str) -> None:
        self.logs.append(message)

    # -- helpers for tests ----------------------------------------------------------------------
    @property
    def counted(self) -> list[Query]:
        return [q for q in self.queries if q.counted]

    def issued_keys(self) -> list[str]:
        return [q.key for q in self.queries]

    def by_key(self, key: str) -> Query:
        return next(q for q in self.queries if q.key == key)

    def _issue(self, kind: str, role: str, messages: list[dict[str, str]], key: str, counted: bool,
               parent: str | None, meta: dict[str, Any]) -> Query:
        # Under the lock: a strategy may ask from several threads (PIKE-O's fix chains beside its
        # main loop), and two asks at the last query must not both pass the budget check.
        with self._lock:
            assert key not in {q.key for q in self.queries}, f"duplicate query key {key!r}"
            index = None
            if counted:
                wall = self.query_limit + self.overshoot
                if self.refuse_after is not None:
                    wall = min(wall, self.refuse_after)
                if self._used >= wall:
                    raise BudgetExhausted(f"scripted budget of {self.query_limit} (+{self.overshoot}) is spent")
                index = self._used + 1
            query = Query(kind, role, key, messages, counted, parent, meta, self._used, index)
            if counted:
                self._used += 1
            self.queries.append(query)
            return query

    def _fallback_settle(self) -> None:
        """``settle_at`` was not reached and the budget is not spent: resolve rather than hang, counted."""
        with self._lock:
            self.fallback_settles += 1
        self._settle()

    def _settle(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            pending, self._pending = self._pending, []
            if self.completion == "shuffle":
                self._shuffler.shuffle(pending)
            else:
                pending.reverse()
            for future, attempt in pending:
                self.completed.append(attempt.key)
                future.set_result(attempt)


class _Deferred(Future):
    """A future that resolves (with every other pending one, out of order) when its result is read."""

    def __init__(self, ctx: ScriptedContext):
        super().__init__()
        self._ctx = ctx

    def result(self, timeout: float | None = None) -> Attempt:
        if self._ctx.settle_on_read and self._ctx.settle_at is None:
            self._ctx._settle()
        return super().result(timeout)


def _response(text: str) -> LLMResponse:
    return LLMResponse(text=text, usage=Usage(prompt_tokens=100, output_tokens=50), latency_s=0.0,
                       provider="scripted", model="scripted", is_llm=False)
