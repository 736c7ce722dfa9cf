"""The run loop: budgets, persistence, resume, concurrency and progress around a strategy's search.

Each task's search runs in its own thread through a ``TaskRun`` (the host's ``TaskContext``). Every
query is charged to the task's budget before it is sent, every answer and verdict is journaled the
moment it completes, and a resumed run replays the journal: a query whose key was answered is not sent
again, an evaluation that finished is not redone, and an evaluation that was in flight when the process
died is retried once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import random
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from pike_harness import __version__
from pike_harness.contracts.evaluation import Evaluator, EvaluatorError
from pike_harness.contracts.journal import (
    AttemptDone,
    Baseline,
    EvalAbort,
    EvalDone,
    EvalStart,
    LLMAnswer,
    LLMFailure,
    Replay,
    RunEnd,
    RunStart,
    TaskEnd,
    within_budget,
)
from pike_harness.contracts.llm import GenerationParams, LLMError, LLMRequest, LLMResponse
from pike_harness.contracts.model import RUNTIME_ERROR, Attempt, EvalResult, Task
from pike_harness.contracts.strategy import BudgetView, Strategy
from pike_harness.errors import BudgetExhausted, UserError
from pike_harness.host.progress import RunProgress
from pike_harness.host.run_config import LLM_FAILURE_LIMIT, OPERATIONAL_OPTIONS, RunConfig
from pike_harness.host.run_signals import StopSignals
from pike_harness.host.store import RunStore, now, sha256
from pike_harness.worker.environment import cpu_model

__all__ = ["OPERATIONAL_OPTIONS", "RunConfig", "RunInterrupted", "Runner", "TaskRun"]
STOP_GRACE_S = 15.0  # how long a stopping run waits for answers already being generated
# The endpoint refused the request itself (bad key, no permission, unknown model or endpoint, a request
# it will never accept): asking again cannot help, so the run stops at once and charges nothing.
FATAL_LLM_STATUSES = frozenset({400, 401, 403, 404})


class RunInterrupted(BaseException):
    """Raised inside strategy threads once the run is stopping (Ctrl-C, SIGTERM, a fatal error).

    A BaseException so a strategy's ``except Exception`` cannot swallow it.
    """


def environment_info(evaluator: Evaluator) -> dict[str, Any]:
    """Versions, host and devices, recorded in run.json: timings are only comparable on one host."""
    info: dict[str, Any] = {
        "pikeh": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "host": platform.node(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
    except ImportError:  # pragma: no cover - torch is a dependency
        info["torch"] = None
    described = evaluator.describe()
    info["evaluator"] = described
    info["gpu"] = described.get("gpu") or described.get("device_name")
    return info


class TaskRun:
    """The host's TaskContext for one task: charges, journals and replays every query and evaluation."""

    def __init__(self, runner: Runner, task: Task):
        self.runner = runner
        self.task = task
        self.rng = random.Random(f"{runner.config.seed}:{task.ref}")
        self._lock = threading.Lock()
        self.queries_used = 0
        self.spent_usd = 0.0
        self.spend_known = True
        self.best_runtime_ms: float | None = None
        self.baseline_ms: float | None = None
        self.baseline: EvalResult | None = None
        self._ref = task.ref

    # -- budget --------------------------------------------------------------------------------
    @property
    def budget(self) -> BudgetView:
        config = self.runner.config
        with self._lock:
            return BudgetView(config.query_budget, self.queries_used, config.money_budget, self.spent_usd)

    def _charge(self, counted: bool) -> int | None:
        self.runner.check_running()
        config = self.runner.config
        with self._lock:
            if config.money_budget is not None and self.spent_usd >= config.money_budget:
                raise BudgetExhausted(f"money budget ${config.money_budget:.2f} spent")
            if not counted:
                return None
            if self.queries_used >= config.query_budget + self.runner.overshoot:
                raise BudgetExhausted(f"query budget {config.query_budget} spent")
            self.queries_used += 1
            return self.queries_used

    def _add_cost(self, response: LLMResponse) -> None:
        with self._lock:
            if response.cost_usd is None:
                self.spend_known = False
            else:
                self.spent_usd += response.cost_usd

    # -- queries -------------------------------------------------------------------------------
    def ask(self, role: str, messages: list[dict[str, str]], *, key: str, counted: bool = True,
            params: GenerationParams | None = None) -> LLMResponse:
        index = self._charge(counted)
        return self._query(role, messages, key, index, counted, params)

    def _query(self, role: str, messages: list[dict[str, str]], key: str, index: int | None, counted: bool,
               params: GenerationParams | None) -> LLMResponse:
        store, replay = self.runner.store, self.runner.replay
        recorded = replay.llm.get((self._ref, key))
        if recorded is not None:
            response = LLMResponse.from_dict(recorded["response"])
            self._add_cost(response)
            return response
        failed = replay.llm_errors.get((self._ref, key))
        if failed is not None:
            # It failed for good before (retries spent): a resume replays that, so the search takes the
            # same path and the journal keeps one verdict per query, rather than asking again.
            raise LLMError(str(failed.get("error")), status=failed.get("status"))
        # The key makes identical prompts distinct queries (the cache and offline:replay match on it).
        request = LLMRequest(messages=messages, role=role, params=params or self.runner.params,
                             key=f"{self._ref}#{key}")
        folder = store.attempt_dir(self._ref, key, index)
        store.write_files(folder, {"prompt.md": render_messages(messages)})
        try:
            with self.runner.in_flight():
                response = self.runner.llm.complete(request)
                # Journal a paid answer even when the run is stopping: every dollar is accounted for.
                store.append(LLMAnswer(task=self._ref, key=key, role=role, index=index, counted=counted,
                                       request_sha256=self.runner.llm.request_hash(request),
                                       response=response.to_dict()))
        except LLMError as exc:
            if exc.status in FATAL_LLM_STATUSES:
                # Not journaled, so nothing is charged: the resume asks this query again.
                self.runner.fail(f"the LLM endpoint refused the request (HTTP {exc.status}: {exc}); nothing was "
                                 "charged to the budget; fix the key, model or --llm-base-url and rerun the "
                                 "same command to resume")
                raise RunInterrupted() from None
            store.append(LLMFailure(task=self._ref, key=key, role=role, index=index, counted=counted,
                                    error=str(exc), status=exc.status,
                                    retries=[dataclasses.asdict(r) for r in getattr(exc, "retries", [])]))
            self.runner.llm_failed(str(exc))
            raise
        self.runner.llm_answered()
        store.write_files(folder, {"response.md": response.text})
        self._add_cost(response)
        self.runner.check_running()
        return response

    # -- attempts ------------------------------------------------------------------------------
    def submit_attempt(self, role: str, messages: list[dict[str, str]], *, key: str, parent: str | None = None,
                       meta: dict[str, Any] | None = None, counted: bool = True,
                       params: GenerationParams | None = None) -> Future[Attempt]:
        index = self._charge(counted)  # in the caller's thread, so indices follow submission order
        return self.runner.attempt_pool.submit(self._attempt, role, messages, key, index, parent,
                                               dict(meta or {}), counted, params)

    def attempt(self, role: str, messages: list[dict[str, str]], *, key: str, parent: str | None = None,
                meta: dict[str, Any] | None = None, counted: bool = True,
                params: GenerationParams | None = None) -> Attempt:
        return self.submit_attempt(role, messages, key=key, parent=parent, meta=meta, counted=counted,
                                   params=params).result()

    def _attempt(self, role: str, messages: list[dict[str, str]], key: str, index: int | None,
                 parent: str | None, meta: dict[str, Any], counted: bool,
                 params: GenerationParams | None) -> Attempt:
        from pike_harness.kit.prompting import extract_code

        attempt = Attempt(task=self._ref, key=key, role=role, index=index, parent=parent, meta=meta)
        try:
            attempt.response = self._query(role, messages, key, index, counted, params)
        except LLMError as exc:
            attempt.llm_error = str(exc)
            self._finish(attempt)
            return attempt
        attempt.code = extract_code(attempt.response.text)
        attempt.result = self._evaluate(attempt.code, key, index)
        self._finish(attempt)
        return attempt

    def _finish(self, attempt: Attempt) -> None:
        key = (self._ref, attempt.key)
        result = attempt.result
        if (result is not None and result.is_correct and result.runtime_ms is not None
                and within_budget(attempt.index, self.runner.config.query_budget)):
            with self._lock:
                if self.best_runtime_ms is None or result.runtime_ms < self.best_runtime_ms:
                    self.best_runtime_ms = result.runtime_ms
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
            runner.begin_evaluation(self._ref, key)
            try:
                result = runner.run_evaluation(self.task, code)
            except BaseException as exc:
                # The evaluator, the user or a bug stopped it, not the candidate: the resume evaluates again.
                runner.end_evaluation(EvalAbort(task=self._ref, key=key, why=type(exc).__name__))
                raise
            if runner.stopping:
                # A verdict that arrives while the run stops may be the stop's doing (a killed worker):
                # never the candidate's record. The resume evaluates it again.
                runner.end_evaluation(EvalAbort(task=self._ref, key=key, why="run stopping"))
                raise RunInterrupted()
            done = EvalDone(task=self._ref, key=key, code_sha256=sha256(code), result=result.to_dict())
            if not runner.end_evaluation(done):
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
        self.runner.store.log(message)
        if not self.runner.progress.live_enabled:
            self.runner.progress.message(message)

    @property
    def best_speedup(self) -> float | None:
        if self.baseline_ms and self.best_runtime_ms:
            return self.baseline_ms / self.best_runtime_ms
        return None


class Runner:
    """One `pikeh run`: opens the store, builds the LLM client and evaluator, runs every task's search."""

    def __init__(self, config: RunConfig, *, store: RunStore, tasks: list[Task], strategy: Strategy,
                 llm: Any, evaluator_factory: Callable[[], Evaluator], progress: RunProgress | None = None,
                 name: str | None = None, plugins: dict[str, Any] | None = None,
                 repair_journal: bool = False, retry_llm_errors: bool = False,
                 llm_failure_limit: int = LLM_FAILURE_LIMIT, grace_s: float = STOP_GRACE_S):
        self.config = config
        self.plugins = plugins or {}  # who provided each plugin (PluginHost.provenance), for run.json
        self.store = store
        self.tasks = tasks
        self.strategy = strategy
        self.llm = llm
        self.evaluator_factory = evaluator_factory
        self.name = name or store.path.name
        self.params = config.generation_params()
        self.overshoot = max(0, int(strategy.overshoot()))
        self.progress = progress or RunProgress(self.name, [t.ref for t in tasks], config.query_budget, live=False)
        self.repair_journal = repair_journal
        self.retry_llm_errors = retry_llm_errors
        self.llm_failure_limit = llm_failure_limit
        self.grace_s = grace_s
        self.replay = Replay()
        self.signals = StopSignals()
        self._stop = threading.Event()
        self._idle = threading.Condition()
        self._queries_in_flight = 0
        self._fatal: BaseException | None = None
        self._llm_streak = 0
        self._llm_lock = threading.Lock()
        # Evaluations that wrote eval_start and await their verdict or eval_abort (see begin_evaluation).
        self._open_evals: set[tuple[str, str]] = set()
        self._evals_lock = threading.Lock()
        self._evals_sealed = False
        self.evaluator: Evaluator | None = None
        self.attempt_pool = ThreadPoolExecutor(max_workers=max(16, 4 * config.llm_concurrency),
                                               thread_name_prefix="pikeh-attempt")
        self.task_runs: dict[str, TaskRun] = {}
        self.failed_tasks: list[str] = []
        self.end_why: str | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def check_running(self) -> None:
        if self._stop.is_set():
            raise RunInterrupted()

    def stop(self) -> None:
        self._stop.set()

    def fail(self, message: str) -> None:
        """Stop the whole run with a one-line error (the first reason wins)."""
        if self._fatal is None:
            self._fatal = UserError(message)
        self.stop()

    # -- LLM health ----------------------------------------------------------------------------
    def llm_answered(self) -> None:
        with self._llm_lock:
            self._llm_streak = 0

    def llm_failed(self, error: str) -> None:
        """A query failed after its retries: many in a row mean a dead endpoint, not bad luck."""
        with self._llm_lock:
            self._llm_streak += 1
            streak = self._llm_streak
        if self.llm_failure_limit and streak >= self.llm_failure_limit:
            self.fail(f"{streak} LLM queries in a row failed (last: {error}); the run stopped rather than spend "
                      "its budget on a failing endpoint; rerun the same command with --retry-llm-errors to ask "
                      "the failed queries again")

    # -- evaluations in flight -----------------------------------------------------------------
    def begin_evaluation(self, task: str, key: str) -> None:
        """Journal eval_start, and remember it until its verdict or eval_abort is journaled."""
        with self._evals_lock:
            if self._evals_sealed or self._stop.is_set():
                raise RunInterrupted()
            self._open_evals.add((task, key))
            self.store.append(EvalStart(task=task, key=key))

    def end_evaluation(self, event: EvalDone | EvalAbort) -> bool:
        """Journal the evaluation's end, unless the stopping run already closed it; True if written."""
        with self._evals_lock:
            if (event.task, event.key) not in self._open_evals:
                return False
            self._open_evals.discard((event.task, event.key))
            self.store.append(event)
            return True

    def _abort_open_evaluations(self, why: str) -> int:
        """Close every evaluation still running with an eval_abort; none may start after this."""
        with self._evals_lock:
            self._evals_sealed = True
            for task, key in sorted(self._open_evals):
                self.store.append(EvalAbort(task=task, key=key, why=why))
            count = len(self._open_evals)
            self._open_evals.clear()
            return count

    # -- LLM queries in flight -----------------------------------------------------------------
    @contextlib.contextmanager
    def in_flight(self) -> Iterator[None]:
        """Marks an LLM query in flight, so a stopping run waits to journal answers it has paid for."""
        with self._idle:
            self._queries_in_flight += 1
        try:
            yield
        finally:
            with self._idle:
                self._queries_in_flight -= 1
                self._idle.notify_all()

    def _announce_drain(self, grace_s: float) -> None:
        """Say what the stop waits for, before anything slow, so the user knows a second Ctrl-C is an option."""
        with self._idle:
            waiting = self._queries_in_flight
        if waiting and grace_s > 0 and not self.signals.abandon:
            again = "; Ctrl-C again to abandon them" if self.signals.requested else ""
            self.progress.message(f"stopping: waiting up to {grace_s:.0f} s for {waiting} LLM "
                                  f"answer{'s' if waiting != 1 else ''}{again}")

    def _drain(self, grace_s: float) -> None:
        """Wait for answers being generated (they are paid for); a second Ctrl-C stops the wait."""
        deadline = time.monotonic() + grace_s
        with self._idle:
            while self._queries_in_flight and time.monotonic() < deadline and not self.signals.abandon:
                self._idle.wait(timeout=min(0.2, max(0.0, deadline - time.monotonic())))
            left = self._queries_in_flight
        if left and self.signals.abandon:
            self.progress.message(f"abandoned {left} LLM answer(s); the resume asks those queries again")

    def run(self) -> str:
        """Run (or resume) every task; returns "complete", "interrupted" or "failed"."""
        with self.signals:
            return self._run()

    def _run(self) -> str:
        self.evaluator = self.evaluator_factory()
        metadata = {
            "name": self.name,
            "created": now(),
            "config": self.config.identity(),
            "operational": {k: getattr(self.config, k) for k in OPERATIONAL_OPTIONS},
            "tasks": [{"ref": t.ref, "suite": t.suite, "id": t.id, "name": t.name, "atol": t.meta.atol,
                       "rtol": t.meta.rtol, "precision": t.meta.precision,
                       "precision_rule": t.meta.precision_rule} for t in self.tasks],
            "environment": environment_info(self.evaluator),
            "strategy": {"name": self.strategy.name, "overshoot": self.overshoot},
            "plugins": self.plugins,
        }
        try:
            self.replay = self.store.open(metadata, repair=self.repair_journal)
        except BaseException:
            self.evaluator.close()
            raise
        if self.retry_llm_errors:
            retried = self.replay.forget_llm_errors()
            if retried:
                self.progress.message(f"--retry-llm-errors: asking failed queries again in {', '.join(retried)}")
        status = "interrupted"
        self.store.append(RunStart(pid=os.getpid(), resume=self.replay.starts, environment=metadata["environment"]))
        try:
            with self.progress:
                status = self._run_tasks()
        finally:
            self._shutdown(status)
        if self._fatal is not None:
            raise self._fatal
        return status

    def _shutdown(self, status: str) -> None:
        """Stop in an order that leaves an exact journal: no evaluation without its end, then run_end."""
        if self.signals.requested:
            self.progress.message(f"{self.signals.last}: stopping; the journal is safe; rerun the same command "
                                  "to resume")
        self.stop()
        if self._fatal is not None:
            status, self.end_why = "failed", str(getattr(self._fatal, "message", self._fatal))
        elif status == "interrupted":
            self.end_why = self.signals.last or "stopped"
        self._announce_drain(self.grace_s)
        try:
            if self.evaluator is not None:
                self.evaluator.close()
        finally:
            self._drain(grace_s=self.grace_s)
            self._abort_open_evaluations(why=self.signals.last or ("error" if status != "complete" else "stopped"))
            self.store.close(final=RunEnd(status=status, why=self.end_why))
            self._write_database()
            self.attempt_pool.shutdown(wait=False, cancel_futures=True)

    def _run_tasks(self) -> str:
        pool = ThreadPoolExecutor(max_workers=max(1, len(self.tasks)), thread_name_prefix="pikeh-task")
        futures = {}
        for task in self.tasks:
            ended = self.replay.task_ends.get(task.ref)
            task_run = TaskRun(self, task)
            self.task_runs[task.ref] = task_run
            if ended and ended.get("reason") in ("done", "budget"):
                self._restore_finished(task_run, ended)
                continue
            futures[pool.submit(self._run_task, task_run)] = task.ref
        try:
            pending = set(futures)
            while pending:  # poll: a signal handler only counts, this loop acts on it
                if self.signals.requested or self._fatal is not None:
                    self.stop()
                    return "interrupted"
                done, pending = wait(pending, timeout=0.2)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        if self._fatal is not None:
            return "interrupted"
        return "failed" if self.failed_tasks else "complete"

    def _restore_finished(self, task_run: TaskRun, ended: dict[str, Any]) -> None:
        """A task that ended in an earlier process is shown, not rerun."""
        ref = task_run.task.ref
        task_run.queries_used = int(ended.get("queries_used") or 0)
        task_run.spent_usd = float(ended.get("spend_usd") or 0.0)
        task_run.spend_known = bool(ended.get("spend_known", True))
        task_run.best_runtime_ms = ended.get("best_runtime_ms")
        task_run.baseline_ms = ended.get("baseline_ms")
        counts = Counter(e["category"] for (task, _), e in self.replay.attempts.items() if task == ref)
        self.progress.update(ref, done=True, queries_used=task_run.queries_used, spend_usd=task_run.spent_usd,
                             spend_known=task_run.spend_known, best_speedup=task_run.best_speedup,
                             baseline_ms=task_run.baseline_ms, counts=counts)

    def _run_task(self, task_run: TaskRun) -> None:
        ref = task_run.task.ref
        reason = "done"
        try:
            task_run.measure_baseline()
            self.strategy.run_task(task_run)
        except BudgetExhausted as exc:
            reason = "budget"
            task_run.log(f"{ref}: {exc}")
        except RunInterrupted:
            return
        except EvaluatorError as exc:
            if not self._stop.is_set():  # while stopping, closing the evaluator aborts what it was doing
                self.fail(f"the evaluator failed: {exc}; rerun the same command to resume")
            return
        except Exception:
            reason = "error"
            self.failed_tasks.append(ref)
            message = traceback.format_exc()
            self.store.log(f"{ref}: strategy error\n{message}")
            self.progress.message(f"{ref}: strategy error (see log.txt): {message.strip().splitlines()[-1]}")
        if self._stop.is_set():
            return
        if reason == "done" and task_run.budget.exhausted:
            reason = "budget"  # strategies catch BudgetExhausted and return; the budget says why they stopped
        self.store.append(TaskEnd(task=ref, reason=reason, queries_used=task_run.queries_used,
                                  spend_usd=task_run.spent_usd, spend_known=task_run.spend_known,
                                  best_runtime_ms=task_run.best_runtime_ms, baseline_ms=task_run.baseline_ms))
        self.progress.update(ref, done=True)

    def run_evaluation(self, task: Task, code: str) -> EvalResult:
        """Evaluate through the evaluator; infrastructure failures are retried, never blamed on the code."""
        assert self.evaluator is not None
        config = self.config
        overrides: dict[str, Any] = {"protocol": config.protocol, "protocol_params": dict(config.protocol_params)}

        def attempt() -> EvalResult:
            self.check_running()
            request = task.eval_request(code, **overrides)
            if config.timeout_s:
                request.limits.compile_timeout_s = config.timeout_s
                request.limits.run_timeout_s = config.timeout_s
            try:
                return self.evaluator.submit(request).result()
            except EvaluatorError:
                raise
            except Exception as exc:  # a cancelled future while stopping
                if self._stop.is_set():
                    raise RunInterrupted() from exc
                raise

        # One policy: the evaluator's own retries count against it (pike_harness.worker.supervise.retry).
        return self.evaluator.retry_policy.call(attempt, retry_on=EvaluatorError, give_up=self._stop.is_set)

    def attempt_finished(self, task_run: TaskRun, attempt: Attempt) -> None:
        speedup = task_run.best_speedup
        runtime = f" {attempt.runtime_ms:.3f} ms" if attempt.runtime_ms is not None else ""
        reason = ""
        if attempt.result is not None and not attempt.is_correct and attempt.result.reason:
            reason = f" ({attempt.result.reason.splitlines()[0][:80]})"
        elif attempt.llm_error:
            reason = f" ({attempt.llm_error[:80]})"
        line = (f"{task_run.task.ref} q{attempt.index if attempt.index is not None else '-'} {attempt.key}: "
                f"{attempt.category}{runtime}{reason}")
        if (task_run.task.ref, attempt.key) not in self.replay.attempts:
            self.store.log(line)
        self.progress.attempt_done(task_run.task.ref, line, attempt.category, queries_used=task_run.queries_used,
                                   spend_usd=task_run.spent_usd, spend_known=task_run.spend_known,
                                   best_speedup=speedup)

    def _write_database(self) -> None:
        from pike_harness.host.store_db import write_run_database

        try:
            write_run_database(self.store.path)
        except Exception as exc:  # the journal is the source of truth; the database can be rebuilt
            print(f"pikeh: warning: could not write run.duckdb ({exc}); `pikeh report` rebuilds it",
                  file=sys.stderr)


def render_messages(messages: list[dict[str, str]]) -> str:
    return "\n\n".join(f"## {m['role']}\n\n{m['content']}" for m in messages) + "\n"
