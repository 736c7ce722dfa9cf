"""One task's search as the host runs it: the ``TaskContext`` a strategy gets.

Every query is charged to the task's budget before it is sent (under a money budget, its worst-case cost
is reserved until its answer is journaled: budget_ledger.py), every answer and verdict is journaled the
moment it completes, and a resumed run replays the journal: a query whose key was answered is not sent
again, an evaluation that finished is not redone, and an evaluation that was in flight when the process
died twice is recorded as interrupted rather than run a third time.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from pike_harness.contracts.journal import (
    AttemptDone,
    Baseline,
    EvalAbort,
    EvalDone,
    LLMAnswer,
    LLMFailure,
)
from pike_harness.contracts.llm import GenerationParams, LLMError, LLMRequest, LLMResponse, PromptRefusedError
from pike_harness.contracts.model import RUNTIME_ERROR, Attempt, EvalResult, Task
from pike_harness.contracts.strategy import BudgetView
from pike_harness.host.budget_ledger import BudgetLedger, Reservation
from pike_harness.host.final_best import Contender, contender
from pike_harness.host.final_timing import describe_paired
from pike_harness.host.llm_health import setup_refused_message, stops_the_run
from pike_harness.host.run_signals import RunInterrupted
from pike_harness.host.store import sha256

if TYPE_CHECKING:
    from pike_harness.host.run_services import RunServices


class TaskRun:
    """The host's TaskContext for one task: charges, journals and replays every query and evaluation."""

    def __init__(self, runner: RunServices, task: Task):
        self.runner = runner
        self.task = task
        self.rng = random.Random(f"{runner.config.seed}:{task.ref}")
        self._lock = threading.Lock()
        config = runner.config
        # The client looks at the run's stop request before every try and during its back-off waits:
        # a stopping run sends no retry (RunInterrupted: nothing journaled, the resume asks again).
        stop_when = getattr(runner.llm, "stop_when", None)
        if stop_when is not None:
            stop_when(lambda: runner.stopping)
        self.ledger = BudgetLedger(config.query_budget, config.money_budget, runner.overshoot,
                                   check_running=runner.check_running)
        journaled = {**runner.replay.llm_errors, **runner.replay.llm}
        self.ledger.seed({key: event["index"] for (ref, key), event in journaled.items()
                          if ref == task.ref and event.get("counted") and isinstance(event.get("index"), int)},
                         {key: cost for (ref, key), event in runner.replay.llm.items()
                          if ref == task.ref and isinstance(cost := _cost_of(event), float)})
        self.best_runtime_ms: float | None = None
        self.best: Contender | None = None  # the final-best rule's pick so far (final_best.py)
        self.final_speedup: tuple[float, float, float] | None = None  # paired (speedup, low, high), once timed
        self.baseline_ms: float | None = None
        self.baseline: EvalResult | None = None
        self._ref = task.ref
        # When the task's search began: its first journaled event (an earlier process), else now.
        self.search_began = runner.replay.first_seen.get(task.ref, time.time())

    # -- budget --------------------------------------------------------------------------------
    @property
    def budget(self) -> BudgetView:
        return self.ledger.view()

    def _charge(self, role: str, messages: list[dict[str, str]], key: str, counted: bool,
                params: GenerationParams | None) -> tuple[int | None, Reservation | None]:
        """The query's index and, under a money budget, its reserved worst case (budget_ledger.py); raises
        ``BudgetExhausted`` when a budget refuses it, as the strategy expects of either budget."""
        self.runner.check_running()
        replay = self.runner.replay
        journaled = (self._ref, key) in replay.llm or (self._ref, key) in replay.llm_errors
        worst_case = None
        pricer = getattr(self.runner.llm, "worst_case_cost", None)  # None: a stand-in client, checked as unpriced
        if self.ledger.money_budget is not None and not journaled and pricer is not None:
            worst_case = pricer(self._request(role, messages, key, params))
        return self.ledger.charge_query(counted, key, worst_case_usd=worst_case, journaled=journaled)

    def _request(self, role: str, messages: list[dict[str, str]], key: str,
                 params: GenerationParams | None) -> LLMRequest:
        # The key makes identical prompts distinct queries (the cache and offline:replay match on it).
        return LLMRequest(messages=messages, role=role, params=params or self.runner.params,
                          key=f"{self._ref}#{key}")

    # -- queries -------------------------------------------------------------------------------
    def ask(self, role: str, messages: list[dict[str, str]], *, key: str, counted: bool = True,
            params: GenerationParams | None = None) -> LLMResponse:
        index, reservation = self._charge(role, messages, key, counted, params)
        return self._query(role, messages, key, index, counted, params, reservation)

    def _query(self, role: str, messages: list[dict[str, str]], key: str, index: int | None, counted: bool,
               params: GenerationParams | None, reservation: Reservation | None = None) -> LLMResponse:
        try:
            return self._send(role, messages, key, index, counted, params, reservation)
        finally:
            self.ledger.settle(reservation)  # an answer settled it already; anything else ends it unpaid

    def _send(self, role: str, messages: list[dict[str, str]], key: str, index: int | None, counted: bool,
              params: GenerationParams | None, reservation: Reservation | None) -> LLMResponse:
        store, replay = self.runner.store, self.runner.replay
        recorded = replay.llm.get((self._ref, key))
        if recorded is not None:
            response = LLMResponse.from_dict(recorded["response"])
            self.ledger.add_cost(response, key)
            return response
        failed = replay.llm_errors.get((self._ref, key))
        if failed is not None:
            # It failed for good before (retries spent, or its prompt refused): a resume replays that, so
            # the search takes the same path and the journal keeps one verdict per query, rather than asking
            # again (a refused prompt would only be refused again).
            error = PromptRefusedError if failed.get("refused") else LLMError
            raise error(str(failed.get("error")), status=failed.get("status"))
        request = self._request(role, messages, key, params)
        folder = store.attempt_dir(self._ref, key, index)
        store.write_files(folder, {"prompt.md": render_messages(messages)})
        try:
            with self.runner.answers.track():
                response = self.runner.llm.complete(request)
                # Journal a paid answer even when the run is stopping: every dollar is accounted for.
                store.append(LLMAnswer(task=self._ref, key=key, role=role, index=index, counted=counted,
                                       request_sha256=self.runner.llm.request_hash(request),
                                       response=response.to_dict()))
                self.ledger.settle(reservation, response)  # its cost replaces its reservation
        except LLMError as exc:
            if stops_the_run(exc):
                # Not journaled, so nothing is charged: the resume asks this query again.
                self.runner.fail(setup_refused_message(exc))
                raise RunInterrupted() from None
            # A refused prompt is this query's failure, journaled like one (so no resume asks it again) and
            # billed nothing; the strategy's next prompt is another request.
            refused = isinstance(exc, PromptRefusedError)
            store.append(LLMFailure(task=self._ref, key=key, role=role, index=index, counted=counted,
                                    error=str(exc), status=exc.status,
                                    retries=[dataclasses.asdict(r) for r in getattr(exc, "retries", [])],
                                    refused=refused, cost_usd=0.0 if refused else None))
            self.runner.llm_health.failed(str(exc), refused=refused)
            raise
        self.runner.llm_health.answered()
        store.write_files(folder, {"response.md": response.text})
        self.runner.check_running()
        return response

    # -- attempts ------------------------------------------------------------------------------
    def submit_attempt(self, role: str, messages: list[dict[str, str]], *, key: str, parent: str | None = None,
                       meta: dict[str, Any] | None = None, counted: bool = True,
                       params: GenerationParams | None = None) -> Future[Attempt]:
        # In the caller's thread, so indices (and money reservations) follow submission order.
        index, reservation = self._charge(role, messages, key, counted, params)
        try:
            future = self.runner.attempt_pool.submit(self._attempt, role, messages, key, index, parent,
                                                     dict(meta or {}), counted, params, reservation)
        except BaseException:
            self.ledger.settle(reservation)
            raise
        future.add_done_callback(lambda _: self.ledger.settle(reservation))  # a cancelled one never ran
        return future

    def attempt(self, role: str, messages: list[dict[str, str]], *, key: str, parent: str | None = None,
                meta: dict[str, Any] | None = None, counted: bool = True,
                params: GenerationParams | None = None) -> Attempt:
        return self.submit_attempt(role, messages, key=key, parent=parent, meta=meta, counted=counted,
                                   params=params).result()

    def _attempt(self, role: str, messages: list[dict[str, str]], key: str, index: int | None,
                 parent: str | None, meta: dict[str, Any], counted: bool,
                 params: GenerationParams | None, reservation: Reservation | None = None) -> Attempt:
        from pike_harness.kit.code_fences import extract_code

        attempt = Attempt(task=self._ref, key=key, role=role, index=index, parent=parent, meta=meta)
        try:
            attempt.response = self._query(role, messages, key, index, counted, params, reservation)
        except LLMError as exc:
            refused = isinstance(exc, PromptRefusedError)
            attempt.llm_error = f"prompt refused (not billed): {exc}" if refused else str(exc)
            self._finish(attempt)
            return attempt
        attempt.code = extract_code(attempt.response.text)
        attempt.result = self._evaluate(attempt.code, key, index)
        self._finish(attempt)
        return attempt

    def _finish(self, attempt: Attempt) -> None:
        key = (self._ref, attempt.key)
        result = attempt.result
        config = self.runner.config
        rival = contender(key=attempt.key, index=attempt.index, category=attempt.category,
                          runtime_ms=attempt.runtime_ms, code=attempt.code,
                          code_sha256=sha256(attempt.code) if attempt.code is not None else None,
                          query_budget=config.query_budget, include_jit_trace=config.include_jit_trace)
        if rival is not None:
            with self._lock:
                if rival.beats(self.best):
                    self.best = rival
                    self.best_runtime_ms = rival.runtime_ms
                    self._write_best(attempt)
        if key not in self.runner.replay.attempts:
            response = attempt.response
            self.runner.store.append(AttemptDone(
                task=self._ref, key=attempt.key, role=attempt.role, index=attempt.index, parent=attempt.parent,
                meta=attempt.meta, category=attempt.category, runtime_ms=attempt.runtime_ms,
                reason=result.reason if result else attempt.llm_error, check=result.check if result else None,
                code_sha256=sha256(attempt.code) if attempt.code is not None else None,
                cost_usd=response.cost_usd if response else None))
        self.runner.attempt_finished(self, attempt)

    def _write_best(self, attempt: Attempt) -> None:
        folder = self.runner.store.task_dir(self._ref)
        self.runner.store.write_files(folder, {"best.py": attempt.code or ""})

    # -- evaluation ----------------------------------------------------------------------------
    def evaluate(self, code: str, *, key: str) -> EvalResult:
        return self._evaluate(code, key, None)

    def _evaluate(self, code: str, key: str, index: int | None) -> EvalResult:
        runner = self.runner
        recorded = runner.replay.evals.get((self._ref, key))
        if recorded is not None:
            return EvalResult.from_dict(recorded["result"])
        folder = runner.store.attempt_dir(self._ref, key, index)
        runner.store.write_files(folder, {"code.py": code})
        if runner.replay.eval_starts.get((self._ref, key), 0) >= 2:
            # Started twice with no verdict and no eval_abort: the harness itself died (SIGKILL, power)
            # both times while this ran. A stop of any other kind writes eval_abort, which never counts.
            result = EvalResult(request_id="", task=self._ref, category=RUNTIME_ERROR, check="interrupted",
                                reason="evaluation was interrupted twice (the harness died while it ran)")
            runner.store.append(EvalDone(task=self._ref, key=key, code_sha256=sha256(code), result=result.to_dict()))
        else:
            runner.open_evals.begin(self._ref, key)
            try:
                result = runner.run_evaluation(self.task, code)
            except BaseException as exc:
                # The evaluator, the user or a bug stopped it, not the candidate: the resume evaluates again.
                runner.open_evals.end(EvalAbort(task=self._ref, key=key, why=type(exc).__name__))
                raise
            if runner.stopping:
                # A verdict that arrives while the run stops may be the stop's doing (a killed worker):
                # never the candidate's record. The resume evaluates it again.
                runner.open_evals.end(EvalAbort(task=self._ref, key=key, why="run stopping"))
                raise RunInterrupted()
            done = EvalDone(task=self._ref, key=key, code_sha256=sha256(code), result=result.to_dict())
            if not runner.open_evals.end(done):
                raise RunInterrupted()  # the stopping run already closed it with an eval_abort
        runner.store.write_files(folder, {"result.json": result.to_json()})
        return result

    def measure_baseline(self) -> None:
        """Eager reference timing on this run's evaluator, so every speedup has a same-sitting baseline."""
        recorded = self.runner.replay.baselines.get((self._ref, "eager"))
        if recorded is not None:
            result = EvalResult.from_dict(recorded["result"])
        else:
            self.set_status(phase="baseline")
            result = self._evaluate(self.task.source, "baseline/eager", None)
            config = self.runner.config
            self.runner.store.append(Baseline(task=self._ref, mode="eager", device=config.device,
                                              protocol=config.protocol, result=result.to_dict()))
        self.baseline = result
        if result.is_correct:
            self.baseline_ms = result.runtime_ms
            self.runner.progress.update(self._ref, baseline_ms=self.baseline_ms)
        else:
            self.log(f"{self._ref}: the eager baseline failed ({result.category}: {result.reason}); "
                     "speedups for this task are undefined")

    # -- progress ------------------------------------------------------------------------------
    def set_status(self, **fields: Any) -> None:
        known = {k: str(v) for k, v in fields.items() if k in ("phase", "note")}
        if known:
            self.runner.progress.update(self._ref, **known)

    def log(self, message: str) -> None:
        """A strategy's line, named by its task: tasks run side by side, so "phase 0: 4 correct of 4
        samples" alone would not say which task it is about."""
        line = f"{self.task.ref} {message}"
        self.runner.store.log(line)
        if not self.runner.progress.live_enabled:
            self.runner.progress.message(line)

    def note_final_timing(self, event: dict[str, Any], *, say: bool = True) -> None:
        """A ``final_timing`` of this task (new or replayed): keep its paired speedup and, with ``say``,
        log it (a replayed one was logged by the process that timed it: a resume does not repeat it)."""
        record = event.get("result")
        paired = EvalResult.from_dict(record).paired if record else None
        if paired is None:
            self.final_speedup = None
            line = (f"final re-timing of {event.get('best_key')}: no paired timing ({event.get('why')}); "
                    "the report uses the search-time number")
        else:
            self.final_speedup = (paired.speedup, paired.ci_low, paired.ci_high)
            line = f"final re-timing of {event.get('best_key')}: {describe_paired(paired)}"
        if say:
            self.log(line)
        self.runner.progress.update(self._ref, done=True)

    @property
    def best_speedup(self) -> float | None:
        if self.baseline_ms and self.best_runtime_ms:
            return self.baseline_ms / self.best_runtime_ms
        return None


def _cost_of(event: dict[str, Any]) -> float | None:
    """The cost a journaled ``llm`` event recorded, when it recorded one."""
    cost = (event.get("response") or {}).get("cost_usd")
    return float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None


def render_messages(messages: list[dict[str, str]]) -> str:
    return "\n\n".join(f"## {m['role']}\n\n{m['content']}" for m in messages) + "\n"
