"""The data model shared by the host and every plugin: tasks, suites and the evaluation records.

One set of dataclasses for everything, so a strategy, an evaluator and a reporter written by
different people agree on what an attempt or a result is. The evaluation records live with the
worker (they are its wire format) and are re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pike_harness.contracts.llm import LLMResponse
from pike_harness.worker.records import (
    CATEGORIES,
    COMPILE_ERROR,
    CORRECT,
    ERROR_CATEGORIES,
    INCORRECT,
    NOISY_TIMING,
    REJECTED,
    RUNTIME_ERROR,
    SCHEMA_VERSION,
    TIMEOUT,
    EvalRequest,
    EvalResult,
    Limits,
    NoiseReport,
    OutputCheck,
    PairedSpec,
    PairedTiming,
    RuntimeStats,
)

__all__ = [
    "Attempt",
    "CATEGORIES",
    "COMPILE_ERROR",
    "CORRECT",
    "ERROR_CATEGORIES",
    "INCORRECT",
    "REJECTED",
    "RUNTIME_ERROR",
    "SCHEMA_VERSION",
    "TIMEOUT",
    "EvalRequest",
    "EvalResult",
    "Limits",
    "NOISY_TIMING",
    "NoiseReport",
    "OutputCheck",
    "PairedSpec",
    "PairedTiming",
    "RuntimeStats",
    "Task",
    "TaskMeta",
]

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
# How a task's precision reaches the model. "tolerance" (PIKE's rule): prompts say nothing about
# precision and any computation whose outputs pass atol/rtol is correct. "stated" (ours): every prompt
# states the task's ``precision`` as a rule (fp32: no TF32, float16 or bfloat16 computation).
PRECISION_RULES = ("tolerance", "stated")


@dataclass(frozen=True)
class TaskMeta:
    """What a suite says about one task beyond its source: tolerances, allowed precision, quirks."""

    atol: float = 1e-2
    rtol: float = 1e-2
    # The lowest precision a candidate may use and still be judged correct ("fp32" allows none).
    precision: str = "fp32"
    precision_rule: str = "tolerance"  # one of PRECISION_RULES
    quirks: tuple[str, ...] = ()
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Task:
    """One KernelBench-format task: a file defining Model, get_inputs and get_init_inputs."""

    suite: str
    id: int
    name: str  # the file stem, e.g. "9_ResNet18"
    path: Path
    meta: TaskMeta = TaskMeta()

    @property
    def ref(self) -> str:
        """The reference users type: ``suite/id``."""
        return f"{self.suite}/{self.id}"

    @cached_property
    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")

    def eval_request(self, candidate_source: str, **overrides: Any) -> EvalRequest:
        """The wire request that evaluates ``candidate_source`` against this task."""
        fields: dict[str, Any] = {
            "task": self.ref,
            "reference_source": self.source,
            "candidate_source": candidate_source,
            "atol": self.meta.atol,
            "rtol": self.meta.rtol,
            "precision": self.meta.precision,
        }
        fields.update(overrides)
        return EvalRequest(**fields)


@dataclass
class Attempt:
    """One LLM query that produced a program, and that program's verdict.

    ``index`` is the query's number within its task (1-based) when it counts toward the query budget,
    or None for uncounted queries; reports truncate budgets by it. ``key`` is the strategy's name for
    the query (unique within the task, stable across a resume).
    """

    task: str
    key: str
    role: str
    index: int | None
    parent: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    code: str | None = None
    response: LLMResponse | None = None
    result: EvalResult | None = None
    llm_error: str | None = None  # the query failed for good after retries: no code to evaluate

    @property
    def category(self) -> str:
        if self.result is not None:
            return self.result.category
        return "llm_error"

    @property
    def is_correct(self) -> bool:
        return self.result is not None and self.result.is_correct

    @property
    def runtime_ms(self) -> float | None:
        return self.result.runtime_ms if self.result is not None and self.result.is_correct else None

    @property
    def failed(self) -> bool:
        """True for every outcome the error-fixing agent should see: errors and wrong output."""
        return not self.is_correct
