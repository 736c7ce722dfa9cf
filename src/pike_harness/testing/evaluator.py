"""A fake evaluator: verdicts without a sandbox, GPU or torch, for tests of strategies and run loops.

It is a real ``Evaluator`` (futures, ``describe``, ``close``) whose verdict on each request comes from
a function, so a strategy plugin's test can run the host's whole run loop (budgets, journal, resume)
in milliseconds. ``seconds(request)`` (optional) makes each evaluation take that long, answered from a
background thread, so a test can interrupt a run while an evaluation is in flight. It says nothing about whether a program is correct or fast: use the ``local``
evaluator for that. ``fake_evaluator_plugin()`` registers it as ``--evaluator fake``.

A request with ``paired`` set gets a deterministic ``PairedTiming`` when its verdict is correct: the
verdict's runtime for the candidate and for the task's reference (the verdict on the reference source),
with a fixed small alternating wobble per pair, estimated by the shared ``paired_estimate`` and sampled
to the request's stop rule. ``noisy(request)`` (optional) returns why a timing is noisy: the result then
carries a flagged ``NoiseReport``, the ``noisy_timing`` flag, and a flagged paired timing.
``pairs=False`` stands in for an evaluator that cannot pair: paired requests come back without one.
"""

from __future__ import annotations

import ast
import dataclasses
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from pike_harness.api import (
    NOISY_TIMING,
    EvalRequest,
    EvalResult,
    Evaluator,
    EvaluatorOptions,
    EvaluatorSpec,
    NoiseReport,
    PairedTiming,
    hookimpl,
    paired_estimate,
)
from pike_harness.worker.python_ast import parse_python

Verdict = Callable[[EvalRequest], EvalResult]
Noisy = Callable[[EvalRequest], str | None]
WOBBLE = (1.01, 0.99, 1.015, 0.985)  # the fake blocks' relative spread, pair by pair (deterministic)
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
                 seconds: Callable[[EvalRequest], float] | None = None, noisy: Noisy | None = None,
                 pairs: bool = True):
        self.verdict = verdict
        self.noisy = noisy
        self.pairs = pairs
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
            result = self._with_timing_records(request, self.verdict(request))
            future.set_result(dataclasses.replace(result, request_id=request.request_id, task=request.task))
        except Exception as exc:  # the verdict function's own bug: surface it like an infrastructure error
            future.set_exception(exc)

    def _with_timing_records(self, request: EvalRequest, result: EvalResult) -> EvalResult:
        """The verdict with the noise report and the paired timing a real evaluator would add."""
        if not result.is_correct:
            return result
        why = self.noisy(request) if self.noisy is not None else None
        if why:
            result = dataclasses.replace(result, noise=NoiseReport(flagged=why), flags=[*result.flags, NOISY_TIMING])
        if request.paired is not None and self.pairs:
            reference = self.verdict(dataclasses.replace(request, candidate_source=request.reference_source,
                                                         paired=None))
            result = dataclasses.replace(result, paired=self._paired(request, reference, result, why))
        return result

    @staticmethod
    def _paired(request: EvalRequest, reference: EvalResult, candidate: EvalResult,
                why: str | None) -> PairedTiming | None:
        spec = request.paired
        assert spec is not None
        if not (reference.is_correct and reference.runtime_ms and candidate.runtime_ms):
            return None
        pairs: list[list[float]] = []
        while True:
            wobble = WOBBLE[len(pairs) % len(WOBBLE)]
            pairs.append([reference.runtime_ms * wobble, candidate.runtime_ms / wobble])
            estimate = paired_estimate([(r, c) for r, c in pairs]) if len(pairs) >= 2 else None
            if estimate and len(pairs) >= spec.min_pairs and estimate.halfwidth <= spec.target_halfwidth:
                stop = "converged"
                break
            if len(pairs) >= spec.max_pairs:
                stop = "max_pairs"
                break
        assert estimate is not None
        wide = None if stop == "converged" else f"interval wider than +-{spec.target_halfwidth:.0%} ({stop})"
        return PairedTiming(speedup=estimate.speedup, ci_low=estimate.ci_low, ci_high=estimate.ci_high, pairs=pairs,
                            reference_ms=estimate.reference_ms, candidate_ms=estimate.candidate_ms, stop=stop,
                            effective_pairs=round(estimate.effective_n, 2), seconds=0.0, noise=NoiseReport(flagged=why) if why else None, flagged=why or wide)

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
                          seconds: Callable[[EvalRequest], float] | None = None, noisy: Noisy | None = None,
                          pairs: bool = True) -> object:
    """A plugin object registering ``FakeEvaluator`` as ``--evaluator NAME`` (for ``invoke(plugins=...)``,
    ``PluginHost(extra=...)`` or ``main_with_plugins``); every evaluator it builds shares ``plugin.built``."""

    class FakeEvaluatorPlugin:
        built: list[FakeEvaluator] = []

        @staticmethod
        @hookimpl
        def register_evaluators(register: Any) -> None:
            def factory(options: EvaluatorOptions) -> Evaluator:
                evaluator = FakeEvaluator(verdict, options, seconds=seconds, noisy=noisy, pairs=pairs)
                FakeEvaluatorPlugin.built.append(evaluator)
                return evaluator

            register(EvaluatorSpec(name=name, factory=factory, description="pike_harness.testing fake evaluator"))

    return FakeEvaluatorPlugin()
