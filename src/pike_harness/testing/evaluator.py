"""A fake evaluator: verdicts without a sandbox, GPU or torch, for tests of strategies and run loops.

It is a real ``Evaluator`` (futures, ``describe``, ``close``) whose verdict on each request comes from
a function, so a strategy plugin's test can run the host's whole run loop (budgets, journal, resume)
in milliseconds. ``seconds(request)`` (optional) makes each evaluation take that long, answered from a
background thread, so a test can interrupt a run while an evaluation is in flight. It says nothing about whether a program is correct or fast: use the ``local``
evaluator for that. ``fake_evaluator_plugin()`` registers it as ``--evaluator fake``.
"""

from __future__ import annotations

import ast
import dataclasses
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from pike_harness.api import EvalRequest, EvalResult, Evaluator, EvaluatorOptions, EvaluatorSpec, hookimpl
from pike_harness.worker.python_ast import parse_python

Verdict = Callable[[EvalRequest], EvalResult]
BASELINE_MS = 1.0
CANDIDATE_MS = 0.5


def default_verdict(request: EvalRequest) -> EvalResult:
    """The reference (a baseline) is correct at ``BASELINE_MS``; a candidate that parses and defines
    ``ModelNew`` is correct at ``CANDIDATE_MS`` (a 2x speedup); anything else is a compile error."""
    if request.baseline_mode is not None or request.candidate_source == request.reference_source:
        return EvalResult(request_id=request.request_id, task=request.task, category="correct",
                          runtime_ms=BASELINE_MS)
    try:
        tree = parse_python(request.candidate_source)
    except SyntaxError as exc:
        return EvalResult(request_id=request.request_id, task=request.task, category="compile_error",
                          reason=f"syntax error: {exc.msg}")
    if not any(isinstance(node, ast.ClassDef) and node.name == "ModelNew" for node in tree.body):
        return EvalResult(request_id=request.request_id, task=request.task, category="compile_error",
                          reason="no class ModelNew")
    return EvalResult(request_id=request.request_id, task=request.task, category="correct", runtime_ms=CANDIDATE_MS)


class FakeEvaluator(Evaluator):
    """Answers every request at once with ``verdict(request)``; ``requests`` records what was asked."""

    name = "fake"

    def __init__(self, verdict: Verdict = default_verdict, options: EvaluatorOptions | None = None, *,
                 seconds: Callable[[EvalRequest], float] | None = None):
        self.verdict = verdict
        self.options = options or EvaluatorOptions()
        self.seconds = seconds
        self.requests: list[EvalRequest] = []
        self._lock = threading.Lock()
        self._pending: dict[Future[EvalResult], threading.Timer] = {}
        self.closed = False

    def submit(self, request: EvalRequest) -> Future[EvalResult]:
        with self._lock:
            self.requests.append(request)
        future: Future[EvalResult] = Future()
        delay = self.seconds(request) if self.seconds is not None else 0.0
        if delay <= 0:
            self._answer(request, future)
            return future
        timer = threading.Timer(delay, self._answer, args=(request, future))
        timer.daemon = True
        with self._lock:
            self._pending[future] = timer
        timer.start()
        return future

    def _answer(self, request: EvalRequest, future: Future[EvalResult]) -> None:
        with self._lock:
            self._pending.pop(future, None)
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = self.verdict(request)
            future.set_result(dataclasses.replace(result, request_id=request.request_id, task=request.task))
        except Exception as exc:  # the verdict function's own bug: surface it like an infrastructure error
            future.set_exception(exc)

    def describe(self) -> dict[str, Any]:
        return {"evaluator": self.name, "device": "none", "note": "pike_harness.testing fake: no program runs"}

    def close(self) -> None:
        """Cancel evaluations still "running" (their futures end cancelled, as a real evaluator's do)."""
        self.closed = True
        with self._lock:
            pending, self._pending = self._pending, {}
        for future, timer in pending.items():
            timer.cancel()
            future.cancel()


def fake_evaluator_plugin(verdict: Verdict = default_verdict, name: str = "fake", *,
                          seconds: Callable[[EvalRequest], float] | None = None) -> object:
    """A plugin object registering ``FakeEvaluator`` as ``--evaluator NAME`` (for ``invoke(plugins=...)``,
    ``PluginHost(extra=...)`` or ``main_with_plugins``); every evaluator it builds shares ``plugin.built``."""

    class FakeEvaluatorPlugin:
        built: list[FakeEvaluator] = []

        @staticmethod
        @hookimpl
        def register_evaluators(register: Any) -> None:
            def factory(options: EvaluatorOptions) -> Evaluator:
                evaluator = FakeEvaluator(verdict, options, seconds=seconds)
                FakeEvaluatorPlugin.built.append(evaluator)
                return evaluator

            register(EvaluatorSpec(name=name, factory=factory, description="pike_harness.testing fake evaluator"))

    return FakeEvaluatorPlugin()
