"""The host's public API: everything a plugin may import, in one place.

Plugins import from here (and evaluator plugins from ``pike_harness.worker.api``, the evaluation
side's surface), never from other host modules or from each other, so a third-party plugin written
against these two modules keeps working when the host's internals move
(tests/foundation/test_plugin_imports.py enforces it). Every name exported here is documented in
docs/plugins.md ("What the API offers"), the run-directory helpers included: what is not documented
there is not exported.
"""

from __future__ import annotations

from pike_harness.contracts.configurable import Configurable, EmptyConfig
from pike_harness.contracts.demo import Demo
from pike_harness.contracts.evaluation import (
    EvalRetryPolicy,
    Evaluator,
    EvaluatorError,
    EvaluatorOptions,
    EvaluatorSpec,
    apply_options,
    attempts_of,
    check_protocol,
    evaluator_config,
)
from pike_harness.contracts.hookspecs import (
    RegisterDemo,
    RegisterEvaluator,
    RegisterLLMBackend,
    RegisterReporter,
    RegisterStrategy,
    RegisterSuite,
    hookimpl,
)
from pike_harness.contracts.journal import (
    AttemptDone,
    Baseline,
    EvalDone,
    LLMAnswer,
    LLMFailure,
    RunEnd,
    RunStart,
    TaskEnd,
)
from pike_harness.contracts.llm import (
    BRAINSTORM,
    FIX,
    OPTIMIZE,
    BackendFactory,
    BackendOptions,
    GenerationParams,
    LLMBackend,
    LLMError,
    LLMRequest,
    LLMResponse,
    PromptRefusedError,
    ProviderPrices,
    RetryRecord,
    TransientLLMError,
    Usage,
    request_hash,
)
from pike_harness.contracts.model import (
    CATEGORIES,
    NOISY_TIMING,
    Attempt,
    EvalRequest,
    EvalResult,
    Limits,
    NoiseReport,
    PairedSpec,
    PairedTiming,
    Task,
    TaskMeta,
)
from pike_harness.contracts.reporting import Column, Reporter, ReportOptions, ReportServices, ReportSummary
from pike_harness.contracts.strategy import BudgetView, Strategy, TaskContext, require_at_least
from pike_harness.contracts.suite import Suite
from pike_harness.errors import BudgetExhausted, PikehError, UserError
from pike_harness.host import speed_of_light
from pike_harness.host.baseline_sets import find_baseline_sets
from pike_harness.host.final_timing import unpaired_reason
from pike_harness.host.output_paths import check_output_dir
from pike_harness.host.pricing import Price, PriceTable
from pike_harness.host.store import JOURNAL, RUN_FILE, RunStore, find_runs, read_journal, sha256
from pike_harness.host.store_db import final_timing_row, materialize
from pike_harness.host.tasks import load_suite
from pike_harness.kit import (
    code_fences,
    failure_reports,
    idea_lists,
    prompt_examples,
    prompt_kinds,
    prompt_pack,
    prompt_templates,
    rounds,
    short_text,
)
from pike_harness.kit.rounds import Order, Sample, fix_rounds, run_round
from pike_harness.kit.sdk_errors import parse_retry_after, redact_secrets, reject_non_json, sdk_errors
from pike_harness.worker.paired_stats import T_QUANTILES_95, PairedEstimate
from pike_harness.worker.paired_stats import estimate as paired_estimate
from pike_harness.worker.python_ast import parse_python
from pike_harness.worker.supervise.gpu_clocks import drift as clock_drift
from pike_harness.worker.text_safety import printable

__all__ = [
    "final_timing_row",
    "unpaired_reason",
    "NOISY_TIMING",
    "NoiseReport",
    "PairedEstimate",
    "PairedSpec",
    "PairedTiming",
    "T_QUANTILES_95",
    "paired_estimate",
    "clock_drift",
    "parse_python",
    "speed_of_light",
    "BackendFactory",
    "Column",
    "Configurable",
    "Demo",
    "EmptyConfig",
    "PikehError",
    "ProviderPrices",
    "RegisterDemo",
    "RegisterEvaluator",
    "RegisterLLMBackend",
    "RegisterReporter",
    "RegisterStrategy",
    "RegisterSuite",
    "JOURNAL",
    "RUN_FILE",
    "read_journal",
    "AttemptDone",
    "Baseline",
    "EvalDone",
    "LLMAnswer",
    "LLMFailure",
    "RunEnd",
    "RunStart",
    "TaskEnd",
    "apply_options",
    "check_output_dir",
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
    "PromptRefusedError",
    "ReportOptions",
    "ReportServices",
    "ReportSummary",
    "Reporter",
    "EvalRetryPolicy",
    "RetryRecord",
    "Strategy",
    "Suite",
    "load_suite",
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
    "code_fences",
    "short_text",
    "printable",
    "failure_reports",
    "idea_lists",
    "prompt_examples",
    "prompt_kinds",
    "prompt_pack",
    "prompt_templates",
    "require_at_least",
    "rounds",
    "Order",
    "Sample",
    "fix_rounds",
    "run_round",
    "redact_secrets",
    "request_hash",
]
