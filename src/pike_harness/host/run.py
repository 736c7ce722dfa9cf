"""The run loop: one ``pikeh run`` from start to an exact journal, around a strategy's search.

``Runner`` opens the store (and replays its journal on a resume), runs each task's search in its own
thread through a ``TaskRun`` (host/task_run.py), retries evaluations the infrastructure failed, and
stops in order: no evaluation without its end, paid answers journaled, then ``run_end``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import threading
import traceback
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor, wait
from typing import Any

from pike_harness.contracts.evaluation import Evaluator, EvaluatorError
from pike_harness.contracts.journal import RunEnd, RunStart, TaskEnd
from pike_harness.contracts.llm import LLMError, LLMRequest, LLMResponse, Usage
from pike_harness.contracts.model import Attempt, EvalResult, PairedSpec, Task
from pike_harness.contracts.strategy import Strategy
from pike_harness.errors import BudgetExhausted, UserError
from pike_harness.host.answers_in_flight import AnswersInFlight
from pike_harness.host.final_timing import best_from_journal, time_final_best
from pike_harness.host.journal_reading import Replay
from pike_harness.host.llm_health import LLMHealth, stops_the_run
from pike_harness.host.open_evaluations import OpenEvaluations
from pike_harness.host.progress import RunProgress
from pike_harness.host.run_config import LLM_FAILURE_LIMIT, OPERATIONAL_OPTIONS, RunConfig
from pike_harness.host.run_environment import environment_info
from pike_harness.host.run_signals import RunInterrupted, StopSignals
from pike_harness.host.stall_watch import StallWatch
from pike_harness.host.store import RunStore, now
from pike_harness.host.task_run import TaskRun
from pike_harness.kit.short_text import shorten
from pike_harness.worker import redaction

__all__ = ["Runner"]
STOP_GRACE_S = 15.0  # how long a stopping run waits for answers already being generated
# Free space the run folder must have before a query is sent: room to journal its answer (a 32,000-token
# answer is a line of about 256 KiB with its escapes) and those of the other queries in flight.
MIN_FREE_BYTES = 4 * 2**20


class SentQueries:
    """The run's LLM client, as the run loop sees it: each query sent is registered with the store
    (``RunStore.query_sent``), so one whose answer never reaches the journal is journaled as
    ``llm_abandoned``, and no query is sent while the run folder's disk is nearly full."""

    def __init__(self, llm: Any, store: RunStore, runner: Runner):
        self._llm = llm
        self._store = store
        self._runner = runner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)

    def complete(self, request: LLMRequest) -> LLMResponse:
        self._runner.check_disk()
        task, _, key = (request.key or "").partition("#")
        tokens, cost = self._estimate(request)
        try:
            digest = self._llm.request_hash(request)
        except Exception:
            digest = None
        self._store.query_sent(task, key, role=request.role, request_sha256=digest,
                               estimated_prompt_tokens=tokens, estimated_cost_usd=cost)
        try:
            return self._llm.complete(request)
        except LLMError as exc:
            if stops_the_run(exc):  # the setup was refused: not journaled, not billed, asked again on resume
                self._store.query_dropped(task, key)
            raise  # otherwise its llm_error is journaled, which settles it
        except BaseException:
            self._store.query_dropped(task, key)
            raise

    def _estimate(self, request: LLMRequest) -> tuple[int | None, float | None]:
        """(prompt tokens, their cost at the input price): characters / 4, output tokens left out."""
        chars = sum(len(str(m.get("content") or "")) for m in request.messages)
        tokens = max(1, chars // 4)
        try:
            backend = self._llm.backend_for(request.role)
            price = self._llm.prices.price(backend.provider, backend.model)
            return tokens, (round(price.cost(Usage(prompt_tokens=tokens)), 6) if price is not None else None)
        except Exception:  # a stand-in client without prices
            return tokens, None


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
        self.llm = SentQueries(llm, store, self) if llm is not None else None
        self.evaluator_factory = evaluator_factory
        self.name = name or store.path.name
        self.params = dataclasses.replace(config.generation_params(), **strategy.sampling())
        self.overshoot = max(0, int(strategy.overshoot()))
        self.progress = progress or RunProgress(self.name, [t.ref for t in tasks], config.query_budget, live=False)
        self.repair_journal = repair_journal
        self.retry_llm_errors = retry_llm_errors
        self.llm_failure_limit = llm_failure_limit
        self.grace_s = grace_s
        self.replay = Replay()
        self.signals = StopSignals()
        self._stop = threading.Event()
        self._fatal: BaseException | None = None
        self.llm_health = LLMHealth(llm_failure_limit, self.fail)
        self.open_evals = OpenEvaluations(store, self._stop.is_set)
        self.answers = AnswersInFlight()
        self.evaluator: Evaluator | None = None
        self.attempt_pool: Executor = ThreadPoolExecutor(max_workers=max(16, 4 * config.llm_concurrency),
                                               thread_name_prefix="pikeh-attempt")
        self.task_runs: dict[str, TaskRun] = {}
        self.failed_tasks: list[str] = []
        self.end_why: str | None = None
        self.min_free_bytes = MIN_FREE_BYTES
        self._write_failed = False

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

    def _store_failed(self, error: UserError) -> BaseException:
        """A write to the run folder failed (a full disk): the run stops with that one line, and the
        writer's thread stops as any stopping run's threads do."""
        self._write_failed = True
        self.fail(error.message)
        return RunInterrupted()

    def check_disk(self) -> None:
        """Stop the run, before a query is sent, when the run folder's disk is too full to record its answer."""
        free = self.store.free_bytes()
        if free is not None and free < self.min_free_bytes:
            self._write_failed = True
            self.fail(f"only {free // 1024} KiB free for {self.store.path}: too little to record the answers of "
                      f"the queries it would send (it needs {self.min_free_bytes // 2**20} MiB); the run stopped "
                      "before sending more; free space, then rerun the same command to resume")
            raise RunInterrupted()

    # -- stopping ------------------------------------------------------------------------------
    def _announce_drain(self, grace_s: float) -> None:
        """Say what the stop waits for, before anything slow, so the user knows a second Ctrl-C is an option."""
        waiting = self.answers.count
        if waiting and grace_s > 0 and not self.signals.abandon:
            again = "; Ctrl-C again to abandon them" if self.signals.requested else ""
            self.progress.message(f"stopping: waiting up to {grace_s:.0f} s for {waiting} LLM "
                                  f"answer{'s' if waiting != 1 else ''}{again}")

    def _drain(self, grace_s: float) -> None:
        """Wait for answers being generated (they are paid for); a second Ctrl-C stops the wait."""
        left = self.answers.drain(grace_s, lambda: self.signals.abandon)
        if left:
            self.progress.message(f"abandoned {left} LLM answer(s) (journaled as llm_abandoned: the provider may "
                                  "bill them); the resume asks those queries again")

    def run(self) -> str:
        """Run (or resume) every task; returns "complete", "interrupted" or "failed"."""
        with self.signals:
            return self._run()

    def _run(self) -> str:
        self.evaluator = self.evaluator_factory()
        metadata: dict[str, Any] = {
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
        self.store.on_write_error = self._store_failed
        status = "interrupted"
        try:
            self.store.append(RunStart(pid=os.getpid(), resume=self.replay.starts,
                                       environment=metadata["environment"]))
            self.check_disk()
            with self.progress:
                status = self._run_tasks()
        except RunInterrupted:
            if self._fatal is None:
                raise
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
        # Once a journal write failed, no answer can be journaled: waiting for them would only delay the error.
        grace_s = 0.0 if self.store.write_error is not None else self.grace_s
        self._announce_drain(grace_s)
        try:
            if self.evaluator is not None:
                self.evaluator.close()
        finally:
            self._drain(grace_s=grace_s)
            # After a failed write (a full disk) nothing more reaches the journal: the first failure is
            # the run's error (``self._fatal``), and no second one is raised over it.
            with contextlib.suppress(RunInterrupted):
                self.open_evals.abort_all(why=self.signals.last or ("error" if status != "complete" else "stopped"))
            why = ("a second Ctrl-C ended the wait for its answer" if self.signals.abandon else
                   f"its answer had not come {self.grace_s:.0f} s after the run began to stop")
            with contextlib.suppress(RunInterrupted):
                self.store.close(final=RunEnd(status=status, why=self.end_why), why_abandoned=why)
            if not self._write_failed:
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
                if self.config.final_retime:  # ended before its final re-timing was journaled, perhaps
                    futures[pool.submit(self._final_timing, task_run)] = task.ref
                continue
            futures[pool.submit(self._run_task, task_run)] = task.ref
        watch = StallWatch(self.store, self.open_evals.count, self.progress.message)
        try:
            pending = set(futures)
            while pending:  # poll: a signal handler only counts, this loop acts on it
                if self.signals.requested or self._fatal is not None:
                    self.stop()
                    return "interrupted"
                done, pending = wait(pending, timeout=0.2)
                watch.poll()
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        if self._fatal is not None:
            return "interrupted"
        return "failed" if self.failed_tasks else "complete"

    def _restore_finished(self, task_run: TaskRun, ended: dict[str, Any]) -> None:
        """A task that ended in an earlier process is shown, not rerun."""
        ref = task_run.task.ref
        ledger = task_run.ledger
        ledger.restore(ended)
        task_run.baseline_ms = ended.get("baseline_ms")
        # From the journal, under this session's final-best rule (--include-jit-trace may have changed).
        task_run.best = best_from_journal(self, task_run)
        task_run.best_runtime_ms = task_run.best.runtime_ms if task_run.best else ended.get("best_runtime_ms")
        counts = Counter(e["category"] for (task, _), e in self.replay.attempts.items() if task == ref)
        self.progress.update(ref, done=True, queries_used=ledger.queries_used, spend_usd=ledger.spent_usd,
                             spend_known=ledger.spend_known, best_speedup=task_run.best_speedup,
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
            # A strategy's message may quote an LLM's answer, a candidate's code or a secret: shown, not obeyed.
            message = redaction.shown(traceback.format_exc(), redaction.secret_values())
            self.store.log(f"{ref}: strategy error\n{message}")
            self.progress.message(f"{ref}: strategy error (see log.txt): {message.strip().splitlines()[-1]}")
        if self._stop.is_set():
            return
        if reason == "done" and task_run.budget.exhausted:
            reason = "budget"  # strategies catch BudgetExhausted and return; the budget says why they stopped
        ledger = task_run.ledger
        self.store.append(TaskEnd(task=ref, reason=reason, queries_used=ledger.queries_used,
                                  spend_usd=ledger.spent_usd, spend_known=ledger.spend_known,
                                  best_runtime_ms=task_run.best_runtime_ms, baseline_ms=task_run.baseline_ms))
        if reason in ("done", "budget"):
            self._final_timing(task_run)
        self.progress.update(ref, done=True)

    def _final_timing(self, task_run: TaskRun) -> None:
        """The task's final best re-timed paired (host/final_timing.py); a stop leaves it to the resume."""
        try:
            time_final_best(self, task_run)
        except RunInterrupted:
            return
        except EvaluatorError as exc:
            if not self._stop.is_set():
                self.fail(f"the evaluator failed during the final re-timing of {task_run.task.ref}: {exc}; "
                          "rerun the same command to resume")

    def run_evaluation(self, task: Task, code: str, *, paired: PairedSpec | None = None) -> EvalResult:
        """Evaluate through the evaluator; infrastructure failures are retried, never blamed on the code."""
        assert self.evaluator is not None
        config = self.config
        overrides: dict[str, Any] = {"protocol": config.protocol, "protocol_params": dict(config.protocol_params),
                                     "paired": paired}

        evaluator = self.evaluator

        def attempt() -> EvalResult:
            self.check_running()
            request = task.eval_request(code, **overrides)
            if config.timeout_s:
                request.limits.compile_timeout_s = config.timeout_s
                request.limits.run_timeout_s = config.timeout_s
            try:
                return evaluator.submit(request).result()
            except EvaluatorError:
                raise
            except Exception as exc:  # a cancelled future while stopping
                if self._stop.is_set():
                    raise RunInterrupted() from exc
                raise

        # One policy: the evaluator's own retries count against it (pike_harness.worker.supervise.retry).
        return evaluator.retry_policy.call(attempt, retry_on=EvaluatorError, give_up=self._stop.is_set)

    def attempt_finished(self, task_run: TaskRun, attempt: Attempt) -> None:
        speedup = task_run.best_speedup
        runtime = f" {attempt.runtime_ms:.3f} ms" if attempt.runtime_ms is not None else ""
        reason = ""
        if attempt.result is not None and not attempt.is_correct and attempt.result.reason:
            reason = f" ({shorten(attempt.result.reason.splitlines()[0], 80)})"
        elif attempt.llm_error:
            reason = f" ({shorten(attempt.llm_error, 80)})"
        line = (f"{task_run.task.ref} q{attempt.index if attempt.index is not None else '-'} {attempt.key}: "
                f"{attempt.category}{runtime}{reason}")
        if (task_run.task.ref, attempt.key) not in self.replay.attempts:
            self.store.log(line)
        ledger = task_run.ledger
        self.progress.attempt_done(task_run.task.ref, line, attempt.category, queries_used=ledger.queries_used,
                                   spend_usd=ledger.spent_usd, spend_known=ledger.spend_known,
                                   best_speedup=speedup)

    def _write_database(self) -> None:
        from pike_harness.host.store_db import write_run_database

        try:
            write_run_database(self.store.path)
        except Exception as exc:  # the journal is the source of truth; the database can be rebuilt
            print(f"pikeh: warning: could not write run.duckdb ({exc}); `pikeh report` rebuilds it",
                  file=sys.stderr)
