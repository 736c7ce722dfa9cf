"""The host's public API: everything a plugin may import, in one place.

Plugins import from here (and from ``pike_harness.worker`` for evaluation internals), never from
each other, so a third-party plugin written against this module keeps working when the host's
internals move.
"""

from __future__ import annotations

from pike_harness import prompting, rounds
from pike_harness.errors import BudgetExhausted, UserError
from pike_harness.evaluation import (
    Evaluator,
    EvaluatorError,
    EvaluatorOptions,
    EvaluatorSpec,
    RetryPolicy,
    apply_options,
    attempts_of,
    check_protocol,
    evaluator_config,
)
from pike_harness.hookspecs import hookimpl
from pike_harness.llm import (
    BRAINSTORM,
    FIX,
    OPTIMIZE,
    BackendOptions,
    GenerationParams,
    LLMBackend,
    LLMError,
    LLMRequest,
    LLMResponse,
    RetryRecord,
    TransientLLMError,
    Usage,
    parse_retry_after,
    redact_secrets,
    reject_non_json,
    request_hash,
    sdk_errors,
)
from pike_harness.model import (
    CATEGORIES,
    Attempt,
    EvalRequest,
    EvalResult,
    Limits,
    Task,
    TaskMeta,
)
from pike_harness.pricing import Price, PriceTable
from pike_harness.reporting import Reporter, ReportOptions, ReportSummary
from pike_harness.rounds import Order, Sample, fix_rounds, run_round
from pike_harness.store import JOURNAL, RUN_FILE, RunStore, find_runs, read_journal, sha256
from pike_harness.store_db import find_baseline_sets, materialize
from pike_harness.strategy import BudgetView, Strategy, TaskContext, require_at_least
from pike_harness.tasks import Suite

__all__ = [
    "JOURNAL",
    "RUN_FILE",
    "read_journal",
    "apply_options",
    "attempts_of",
    "check_protocol",
    "evaluator_config",
    "Price",
    "PriceTable",
    "RunStore",
    "find_baseline_sets",
    "find_runs",
    "materialize",
    "sha256",
    "BRAINSTORM",
    "CATEGORIES",
    "FIX",
    "OPTIMIZE",
    "Attempt",
    "BackendOptions",
    "BudgetExhausted",
    "BudgetView",
    "EvalRequest",
    "EvalResult",
    "Evaluator",
    "EvaluatorError",
    "EvaluatorOptions",
    "EvaluatorSpec",
    "GenerationParams",
    "LLMBackend",
    "LLMError",
    "LLMRequest",
    "LLMResponse",
    "Limits",
    "ReportOptions",
    "ReportSummary",
    "Reporter",
    "RetryPolicy",
    "RetryRecord",
    "Strategy",
    "Suite",
    "Task",
    "TaskContext",
    "TaskMeta",
    "TransientLLMError",
    "Usage",
    "UserError",
    "hookimpl",
    "parse_retry_after",
    "reject_non_json",
    "sdk_errors",
    "prompting",
    "require_at_least",
    "rounds",
    "Order",
    "Sample",
    "fix_rounds",
    "run_round",
    "redact_secrets",
    "request_hash",
]
