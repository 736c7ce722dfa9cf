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
import json
import os
import platform
import random
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from pike_harness import __version__
from pike_harness.errors import BudgetExhausted, UserError
from pike_harness.evaluation import Evaluator, EvaluatorError
from pike_harness.llm import GenerationParams, LLMError, LLMRequest, LLMResponse
from pike_harness.model import RUNTIME_ERROR, Attempt, EvalResult, Task
from pike_harness.progress import RunProgress
from pike_harness.store import Replay, RunStore, now, safe_name, sha256
from pike_harness.strategy import BudgetView, Strategy
from pike_harness.worker.environment import cpu_model

# Options that may change between a run and its resume without changing its results.
OPERATIONAL_OPTIONS = ("llm_base_url", "llm_concurrency", "evaluator_options", "llm_cache", "replay_dir")
STOP_GRACE_S = 15.0  # how long a stopping run waits for answers already being generated


class RunInterrupted(BaseException):
    """Raised inside strategy threads once the run is stopping (Ctrl-C, SIGTERM, a fatal error).

    A BaseException so a strategy's ``except Exception`` cannot swallow it.
    """


@dataclass
class RunConfig:
    """Everything that defines a run. All but OPERATIONAL_OPTIONS must match when a run is resumed."""

    strategy: str
    suite: str
    llm: str
    tasks: str | None = None
    fix_llm: str | None = None
    query_budget: int = 300
    money_budget: float | None = None
    evaluator: str = "local"
    device: str = "auto"
    protocol: str = "robust"
    protocol_params: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    temperature: float | None = 0.8
    max_tokens: int = 32_000
    reasoning_effort: str | None = None
    timeout_s: float | None = None
    strategy_options: dict[str, Any] = field(default_factory=dict)
    llm_base_url: str | None = None
    llm_concurrency: int = 10
    llm_cache: str | None = None
    replay_dir: str | None = None
    evaluator_options: dict[str, Any] = field(default_factory=dict)

    def identity(self) -> dict[str, Any]:
        """The configuration that must match on resume."""
        data = dataclasses.asdict(self)
        for name in OPERATIONAL_OPTIONS:
            data.pop(name, None)
        return data

    def default_run_name(self) -> str:
        """Deterministic, so re-running the same command resumes the same run; the hash of the whole
        configuration makes runs that differ in any option (a preset, a fix model) distinct runs."""
        digest = sha256(json.dumps(self.identity(), sort_keys=True, default=str))[:8]
        parts = [self.strategy, self.suite]
        if self.tasks:
            parts.append(f"t{self.tasks}")
        parts += [self.llm, f"q{self.query_budget}", f"s{self.seed}", digest]
        return safe_name("_".join(parts).replace(":", "-").replace("/", "-"), limit=140)

    def generation_params(self) -> GenerationParams:
        return GenerationParams(temperature=self.temperature, max_tokens=self.max_tokens,
                                reasoning_effort=self.reasoning_effort)


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
                store.append({"type": "llm", "task": self._ref, "key": key, "role": role, "index": index,
                              "counted": counted, "request_sha256": self.runner.llm.request_hash(request),
                              "response": response.to_dict()})
        except LLMError as exc:
            store.append({"type": "llm_error", "task": self._ref, "key": key, "role": role, "index": index,
                          "counted": counted, "error": str(exc), "status": exc.status,
                          "retries": [dataclasses.asdict(r) for r in getattr(exc, "retries", [])]})
            raise
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
        from pike_harness.prompting import extract_code

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
        if result is not None and result.is_correct and result.runtime_ms is not None:
            with self._lock:
                if self.best_runtime_ms is None or result.runtime_ms < self.best_runtime_ms:
                    self.best_runtime_ms = result.runtime_ms
                    self._write_best(attempt)
        if key not in self.runner.replay.attempts:
            response = attempt.response
            self.runner.store.append({
                "type": "attempt", "task": self._ref, "key": attempt.key, "role": attempt.role,
                "index": attempt.index, "parent": attempt.parent, "meta": attempt.meta,
                "category": attempt.category, "runtime_ms": attempt.runtime_ms,
                "reason": result.reason if result else attempt.llm_error,
                "check": result.check if result else None,
                "code_sha256": sha256(attempt.code) if attempt.code is not None else None,
                "cost_usd": response.cost_usd if response else None,
            })
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
            # It was started twice and the harness died both times: do not try a third time.
            result = EvalResult(request_id="", task=self._ref, category=RUNTIME_ERROR, check="interrupted",
                                reason="evaluation was interrupted twice (the harness died while it ran)")
        else:
            runner.store.append({"type": "eval_start", "task": self._ref, "key": key})
            try:
                result = runner.run_evaluation(self.task, code)
            except (EvaluatorError, RunInterrupted) as exc:
                # The evaluator or the user stopped it, not the candidate: this start does not count
                # toward "interrupted twice" (only a harness that died mid-evaluation leaves a bare start).
                runner.store.append({"type": "eval_abort", "task": self._ref, "key": key,
                                     "why": type(exc).__name__})
                raise
        runner.store.append({"type": "eval", "task": self._ref, "key": key, "code_sha256": sha256(code),
                             "result": result.to_dict()})
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
            self.runner.store.append({"type": "baseline", "task": self._ref, "mode": "eager",
                                      "device": config.device, "protocol": config.protocol,
                                      "result": result.to_dict()})
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
                 name: str | None = None):
        self.config = config
        self.store = store
        self.tasks = tasks
        self.strategy = strategy
        self.llm = llm
        self.evaluator_factory = evaluator_factory
        self.name = name or store.path.name
        self.params = config.generation_params()
        self.overshoot = max(0, int(strategy.overshoot()))
        self.progress = progress or RunProgress(self.name, [t.ref for t in tasks], config.query_budget, live=False)
        self.replay = Replay()
        self._stop = threading.Event()
        self._idle = threading.Condition()
        self._queries_in_flight = 0
        self._fatal: BaseException | None = None
        self.evaluator: Evaluator | None = None
        self.attempt_pool = ThreadPoolExecutor(max_workers=max(16, 4 * config.llm_concurrency),
                                               thread_name_prefix="pikeh-attempt")
        self.task_runs: dict[str, TaskRun] = {}
        self.failed_tasks: list[str] = []

    # -- lifecycle -----------------------------------------------------------------------------
    def check_running(self) -> None:
        if self._stop.is_set():
            raise RunInterrupted()

    def stop(self) -> None:
        self._stop.set()

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

    def _drain(self, grace_s: float) -> None:
        deadline = time.monotonic() + grace_s
        with self._idle:
            while self._queries_in_flight and time.monotonic() < deadline:
                self._idle.wait(timeout=max(0.0, deadline - time.monotonic()))

    def run(self) -> str:
        """Run (or resume) every task; returns "complete", "interrupted" or "failed"."""
        self.evaluator = self.evaluator_factory()
        metadata = {
            "name": self.name,
            "created": now(),
            "config": self.config.identity(),
            "operational": {k: getattr(self.config, k) for k in OPERATIONAL_OPTIONS},
            "tasks": [{"ref": t.ref, "suite": t.suite, "id": t.id, "name": t.name, "atol": t.meta.atol,
                       "rtol": t.meta.rtol, "precision": t.meta.precision} for t in self.tasks],
            "environment": environment_info(self.evaluator),
            "strategy": {"name": self.strategy.name, "overshoot": self.overshoot},
        }
        try:
            self.replay = self.store.open(metadata)
        except BaseException:
            self.evaluator.close()
            raise
        status = "interrupted"
        self.store.append({"type": "run_start", "pid": os.getpid(), "resume": self.replay.starts,
                           "environment": metadata["environment"]})
        previous_sigterm = _raise_on_sigterm()
        try:
            with self.progress:
                status = self._run_tasks()
        except KeyboardInterrupt:
            self.stop()
            self.progress.message("interrupted: journal is safe; rerun the same command to resume")
        finally:
            _restore_sigterm(previous_sigterm)
            self.stop()
            self.evaluator.close()
            self._drain(grace_s=STOP_GRACE_S)
            self.store.append({"type": "run_end", "status": status})
            self.store.close()
            self._write_database()
            self.attempt_pool.shutdown(wait=False, cancel_futures=True)
        return status

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
            while pending:  # poll so Ctrl-C reaches this thread promptly
                done, pending = wait(pending, timeout=0.5)
                if self._fatal is not None:
                    raise self._fatal
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
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
            self._fatal = UserError(f"the evaluator failed: {exc}; rerun the same command to resume")
            self.stop()
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
        self.store.append({"type": "task_end", "task": ref, "reason": reason,
                           "queries_used": task_run.queries_used, "spend_usd": task_run.spent_usd,
                           "spend_known": task_run.spend_known, "best_runtime_ms": task_run.best_runtime_ms,
                           "baseline_ms": task_run.baseline_ms})
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

        # One policy: the evaluator's own retries count against it (pike_harness.worker.retry).
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
        from pike_harness.store_db import write_run_database

        try:
            write_run_database(self.store.path)
        except Exception as exc:  # the journal is the source of truth; the database can be rebuilt
            print(f"pikeh: warning: could not write run.duckdb ({exc}); `pikeh report` rebuilds it",
                  file=sys.stderr)


def render_messages(messages: list[dict[str, str]]) -> str:
    return "\n\n".join(f"## {m['role']}\n\n{m['content']}" for m in messages) + "\n"


def _raise_on_sigterm() -> Any:
    """Treat SIGTERM like Ctrl-C so a killed job still journals its end (kill -9 needs no help)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, handler)


def _restore_sigterm(previous: Any) -> None:
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)
